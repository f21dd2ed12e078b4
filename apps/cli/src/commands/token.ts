import { ConfigError, createToken, tokenSecrets } from '@arcflow/core';
import { readCliEnv } from '../env.ts';

export interface TokenFlags {
  readonly thread?: string;
  readonly run?: string;
  readonly actions?: string;
  readonly agents?: string;
  readonly subject?: string;
  readonly tenant?: string;
  readonly 'expires-in'?: string;
}

/**
 * `arcflow token`: prints an end user's token (SPEC §19) signed with the first secret of
 * `ARCFLOW_TOKEN_SECRET`, as `createToken` makes it; needs neither Redis nor a server.
 */
export async function tokenCommand(flags: TokenFlags): Promise<number> {
  const { token_secret } = readCliEnv();
  if (token_secret === undefined) throw new ConfigError('arcflow token signs with ARCFLOW_TOKEN_SECRET (at least 32 bytes), which is not set');
  // Refused here, under the variable's name (createToken would call it `secret`).
  tokenSecrets(token_secret);
  const list = (value: string | undefined) => (value === undefined ? undefined : value.split(',').map((item) => item.trim()));
  const expires = flags['expires-in'];
  const expires_in_s = expires === undefined ? undefined : /^[0-9]+$/.test(expires) ? Number(expires) : Number.NaN;
  if (Number.isNaN(expires_in_s)) throw new ConfigError(`--expires-in must be a whole number of seconds from 1 to 86400, got ${JSON.stringify(expires)}`);
  const token = await createToken({
    secret: token_secret,
    ...(flags.thread !== undefined ? { thread_id: flags.thread } : {}),
    ...(flags.run !== undefined ? { run_id: flags.run } : {}),
    actions: (list(flags.actions) ?? []) as never,
    ...(flags.agents !== undefined ? { agents: list(flags.agents) } : {}),
    ...(flags.subject !== undefined ? { subject: flags.subject } : {}),
    ...(flags.tenant !== undefined ? { tenant: flags.tenant } : {}),
    ...(expires_in_s !== undefined ? { expires_in_s } : {}),
  }).catch((error: unknown) => {
    // The CLI's own words for the options: flags, not createToken's fields.
    if (error instanceof ConfigError) throw new ConfigError(flagWords(error.message));
    throw error;
  });
  console.log(token);
  return 0;
}

const FLAG_OF: Readonly<Record<string, string>> = {
  thread_id: '--thread',
  run_id: '--run',
  actions: '--actions',
  agents: '--agents',
  subject: '--subject',
  tenant: '--tenant',
  expires_in_s: '--expires-in',
};

function flagWords(message: string): string {
  // Field names with an underscore are only ever fields; the others are words too, renamed where they lead the message.
  return message
    .replace(/^createToken: /, '')
    .replace(/\b(thread_id|run_id|expires_in_s)\b/g, (field) => FLAG_OF[field] ?? field)
    .replace(/^(actions|agents|subject|tenant)\b/, (field) => FLAG_OF[field] ?? field);
}
