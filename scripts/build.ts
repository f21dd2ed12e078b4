// `npm run build`: every package built to its dist/ (TypeScript project references: JavaScript,
// .d.ts and source maps), with what the built code reads at run time beside it: the store's Lua
// scripts, the JSON Schema meta-schemas' validators, the demo's example agent, the console's bundle, and the license (and, for `arcflow`, the README) each package ships. Each package's
// `prepack` runs this, so `npm pack` in any package packs built code.
import { execFileSync } from 'node:child_process';
import { cpSync, mkdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleConsole } from '../apps/server/src/console-assets.ts';
import { PACKAGES } from './packages.ts';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');

// --force: dist/ may have been removed while the build info (beside it, outside what is packed) stayed.
execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-b', '--force', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
// The validators of the JSON Schema meta-schemas, compiled ahead (scripts/meta-validators.ts), beside the code that loads them.
cpSync(join(root, 'packages/core/src/tools/meta-validators'), join(root, 'packages/core/dist/tools/meta-validators'), { recursive: true });
// The store's Lua scripts, each beside the module that runs it (and the shared includes in redis/lua/).
cpSync(join(root, 'packages/queue/src'), join(root, 'packages/queue/dist'), { recursive: true, filter: (from) => !from.endsWith('.ts') });
mkdirSync(join(root, 'apps/cli/examples'), { recursive: true });
cpSync(join(root, 'examples/weather-agent.ts'), join(root, 'apps/cli/examples/weather-agent.ts'));
for (const dir of PACKAGES) cpSync(join(root, 'LICENSE'), join(root, dir, 'LICENSE'));
// The package users install shows the project's README.
cpSync(join(root, 'README.md'), join(root, 'packages/arcflow/README.md'));
// The web console, bundled (Preact, esbuild) beside the server's code: no bundler at run time.
const consoleOut = join(root, 'apps/server/dist/console');
mkdirSync(consoleOut, { recursive: true });
for (const file of ['index.html', 'app.css']) cpSync(join(root, 'apps/server/console', file), join(consoleOut, file));
await bundleConsole(join(consoleOut, 'app.js'));
