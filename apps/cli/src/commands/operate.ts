import { RequestError, type RunRecord } from '@arcflow/core';
import { parseJsonFlag, withClient } from './runs.ts';

export interface ForkFlags {
  'from-iteration'?: string;
  step?: string;
  config?: string;
  'exec-config'?: string;
  json?: boolean;
}

/** `arcflow fork`: a new run that replays the source's rounds before --from-iteration and runs live from there (SPEC §15); prints its id. */
export async function forkCommand(run_id: string, flags: ForkFlags): Promise<number> {
  const given = flags['from-iteration'];
  // A workflow run's step re-runs from iteration 1 unless told (SPEC §15); an agent run's fork names its iteration.
  if (given === undefined && flags.step === undefined) throw new RequestError('invalid_request', 'fork takes --from-iteration K (and, for a workflow run, --step S)');
  if (given !== undefined && !/^\d+$/.test(given)) throw new RequestError('invalid_request', `--from-iteration must be a whole number, got ${JSON.stringify(given)}`);
  const config = parseJsonFlag('--config', flags.config);
  const exec_config = parseJsonFlag('--exec-config', flags['exec-config']);
  return withClient(async (client) => {
    const forked = await client.fork(run_id, {
      from: { iteration: given === undefined ? 1 : Number(given), ...(flags.step !== undefined ? { step_id: flags.step } : {}) },
      ...(config !== undefined ? { config } : {}),
      ...(exec_config !== undefined ? { exec_config } : {}),
    });
    // Standard output is the new run's id alone (a script takes it as it is); its new thread, if any, is told on standard error.
    console.log(flags.json ? JSON.stringify(forked) : forked.run_id);
    if (!flags.json && forked.thread_id) console.error(`the fork is on a new thread: ${forked.thread_id}`);
    return 0;
  });
}

export interface BulkFlags {
  status?: string;
  agent?: string;
  tenant?: string;
  since?: string;
  'dry-run'?: boolean;
  json?: boolean;
}

/** `arcflow runs retry|cancel`: acts on every run the filter matches (SPEC §15); safe to repeat. */
export async function bulkCommand(action: 'retry' | 'cancel', flags: BulkFlags): Promise<number> {
  if (flags.status === undefined) throw new RequestError('invalid_request', `runs ${action} takes --status S`);
  return withClient(async (client) => {
    const outcome = await client.bulk({
      action,
      filter: {
        status: flags.status as RunRecord['status'],
        ...(flags.agent !== undefined ? { agent: flags.agent } : {}),
        ...(flags.tenant !== undefined ? { tenant: flags.tenant } : {}),
        ...(flags.since !== undefined ? { since: flags.since } : {}),
      },
      ...(flags['dry-run'] ? { dry_run: true } : {}),
    });
    if (flags.json) console.log(JSON.stringify(outcome));
    else {
      const done = action === 'retry' ? 'retried' : 'cancelled';
      console.log(
        flags['dry-run']
          ? `matched ${outcome.matched}; would have ${done} ${outcome.run_ids.length} (dry run: nothing changed)`
          : `matched ${outcome.matched}; ${done} ${outcome.acted}`,
      );
      for (const id of outcome.run_ids) console.log(id);
    }
    return 0;
  });
}
