import { runLocal } from '@arcflow/core';
import { reply, scriptedProvider } from '@arcflow/testing';
import fc from 'fast-check';
import { describe, it } from 'vitest';
import { expectRunSurvived, fuzzedAgent, modelTurns } from './model-output-arbitrary.ts';

describe('any model output (property)', () => {
  it('ends the run, ends every call exactly once, and keeps values and input-chosen keys out of every event', async () => {
    await fc.assert(
      fc.asyncProperty(modelTurns, async (turns) => {
        const model = scriptedProvider([...turns, reply('done')]);
        expectRunSurvived(await runLocal(fuzzedAgent, 'go', { provider: model, logger: false, provider_retry: { attempts: 2, backoff_ms: 1 } }));
      }),
      { numRuns: 200 },
    );
  });
});
