#!/usr/bin/env -S node --max-semi-space-size=32
// The arcflow command (its code is @arcflow/cli). The shebang's Node flags are the worker's
// (WORKER_NODE_FLAGS in @arcflow/worker).
await import('@arcflow/cli/bin');
