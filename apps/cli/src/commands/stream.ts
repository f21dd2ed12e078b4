import { RequestError, type StreamChunk } from '@arcflow/core';
import { withClient } from './runs.ts';

/**
 * `arcflow stream <run_id>`: the run's text as the model writes it (SPEC §12), until the run
 * ends; `--json` prints each chunk as a JSON line instead, `--after N` starts after offset N. A
 * terminal cannot take back text, so a `reset` (a provider call made again) prints a line
 * saying that the iteration's text above is replaced by what follows.
 */
export async function streamCommand(run_id: string, flags: { after?: string; json?: boolean }): Promise<number> {
  const after = flags.after === undefined ? 0 : Number(flags.after);
  if (!Number.isSafeInteger(after) || after < 0) throw new RequestError('invalid_request', `--after must be a whole number >= 0, got ${JSON.stringify(flags.after)}`);
  return withClient(async (client) => {
    let shown: { step_id: string; iteration: number } | undefined;
    for await (const chunk of client.stream(run_id, { after })) {
      if (flags.json) {
        process.stdout.write(`${JSON.stringify(chunk)}\n`);
        continue;
      }
      shown = printChunk(chunk, shown);
    }
    return 0;
  });
}

/** Prints a chunk for people; returns the iteration whose text is on screen now. */
function printChunk(chunk: StreamChunk, shown: { step_id: string; iteration: number } | undefined): { step_id: string; iteration: number } | undefined {
  switch (chunk.type) {
    case 'text': {
      const place = { step_id: chunk.step_id, iteration: chunk.iteration };
      if (shown && (shown.step_id !== place.step_id || shown.iteration !== place.iteration)) process.stdout.write('\n');
      process.stdout.write(chunk.delta);
      return place;
    }
    case 'reset':
      process.stdout.write(`\n[the model's answer for ${chunk.step_id} iteration ${chunk.iteration} was restarted (attempt ${chunk.attempt}): it replaces the text above]\n`);
      return undefined;
    case 'tool_call':
      process.stdout.write(`${shown ? '\n' : ''}[calls ${chunk.tool_name} (${chunk.tool_call_id})]\n`);
      return undefined;
    case 'tool_result':
      process.stdout.write(`[${chunk.tool_call_id} ${chunk.status}]\n`);
      return undefined;
    case 'end':
      process.stdout.write(`${shown ? '\n' : ''}[run ${chunk.status}]\n`);
      return undefined;
  }
}
