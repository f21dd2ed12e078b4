import { withClient, parseJsonFlag } from './runs.ts';

/**
 * `arcflow tool-result <run_id> <tool_call_id> (--output JSON | --error TEXT)`: answers a call
 * waiting for its result from outside (SPEC §20). Answering again prints the first answer. The
 * command line gives exactly one of `output` and `error` (checked by main.ts).
 */
export async function toolResultCommand(run_id: string, tool_call_id: string, flags: { output?: string; error?: string; json?: boolean }): Promise<number> {
  const answer = flags.output !== undefined ? { output: parseJsonFlag('--output', flags.output) } : { error: flags.error! };
  return withClient(async (client) => {
    const taken = await client.submitToolResult(run_id, tool_call_id, answer);
    if (flags.json) console.log(JSON.stringify(taken));
    else console.log(`${tool_call_id} ${taken.status} (answered ${new Date(taken.answered_at).toISOString()})`);
    return 0;
  });
}
