import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { ARCFLOW_BIN } from '@arcflow/worker';

const run = promisify(execFile);

export interface CliResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the `arcflow` command to its end with `env`; a failing exit is a result, not a throw. */
export async function runArcflow(env: NodeJS.ProcessEnv, ...args: string[]): Promise<CliResult> {
  try {
    const { stdout, stderr } = await run(process.execPath, [ARCFLOW_BIN, ...args], { env, timeout: 60_000 });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as CliResult;
    return { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
}
