import { THREAD_ID_PATTERN } from '../conversation/threads.ts';
import { clipped, nearestKey } from '../definitions/known-keys.ts';
import { ConfigError } from '../errors.ts';
import { NamePattern } from '../names.ts';

/**
 * What an end user's token may do (SPEC §19): `read` the thread's messages and its runs' records,
 * events and streams (or the one run's); `send` runs on the thread, of the agents it names;
 * `cancel` its runs; `respond` to its runs' approvals and tool results.
 */
export const TOKEN_ACTIONS = ['read', 'send', 'cancel', 'respond'] as const;
export type TokenAction = (typeof TOKEN_ACTIONS)[number];

export const TOKEN_DEFAULTS = Object.freeze({ expires_in_s: 3_600, max_expires_in_s: 86_400, min_secret_bytes: 32, max_subject_length: 128 });

/** A tenant's name (SPEC §14). */
export const TENANT_PATTERN = /^[A-Za-z0-9_.:-]{1,128}$/;

/** Why `value`, given as `field`, is not a tenant name: the message to refuse it with; undefined when it is one. */
export function tenantNameProblem(field: string, value: unknown): string | undefined {
  if (typeof value === 'string' && TENANT_PATTERN.test(value)) return undefined;
  return `${field} must match ${TENANT_PATTERN}, got ${shown(value)}`;
}

/** The token's issuer and audience, and its header's `typ`: a JWT made for anything else is refused. */
export const TOKEN_ISSUER = 'arcflow';
export const TOKEN_AUDIENCE = 'arcflow-serve';
export const TOKEN_TYPE = 'arcflow+jwt';

/** What a token is for: one thread or one run, the actions, and who it was made for. */
export interface TokenScope {
  /** The thread it names (or `run_id`, never both). */
  readonly thread_id?: string;
  /** The one run it names (or `thread_id`, never both). A run token cannot `send`. */
  readonly run_id?: string;
  readonly actions: readonly TokenAction[];
  /** With `send`: the agents it may enqueue (at least one). */
  readonly agents?: readonly string[];
  /** The app's user id (≤ 128 characters), recorded on the runs it enqueues as `enqueued_by: "token:<subject>"`. */
  readonly subject?: string;
  /** The tenant (SPEC §14) of the runs it enqueues; a request naming another tenant is refused. */
  readonly tenant?: string;
}

/** `createToken`'s options: the scope, the secret, and how long the token lives. */
export interface TokenOptions extends TokenScope {
  /** `ARCFLOW_TOKEN_SECRET`: one secret of at least 32 bytes, or two separated by a comma (signs with the first). */
  readonly secret: string;
  /** Seconds until it expires: 1–86,400, default 3,600. */
  readonly expires_in_s?: number;
}

/** A token that checked out: its scope, its id, and when it expires (epoch seconds). */
export interface TokenGrant extends TokenScope {
  readonly token_id: string;
  readonly expires_at_s: number;
}

/** The app's user id: what `enqueued_by` shows, so printable. */
const SUBJECT = new RegExp(`^[^\\p{Cc}]{1,${TOKEN_DEFAULTS.max_subject_length}}$`, 'u');

const OPTION_KEYS = ['secret', 'thread_id', 'run_id', 'actions', 'agents', 'subject', 'tenant', 'expires_in_s'] as const;

/**
 * The secrets of an `ARCFLOW_TOKEN_SECRET` value: one, or two separated by a comma (the first
 * signs, both verify), each at least 32 bytes. Throws a ConfigError that never shows a secret.
 */
export function tokenSecrets(value: string, name = 'ARCFLOW_TOKEN_SECRET'): readonly string[] {
  if (typeof value !== 'string' || value.trim() === '') throw new ConfigError(`${name} must be a secret of at least ${TOKEN_DEFAULTS.min_secret_bytes} bytes`);
  const secrets = value.split(',').map((secret) => secret.trim());
  if (secrets.length > 2) throw new ConfigError(`${name} holds ${secrets.length} secrets; give one, or two separated by a comma while rotating (the first signs)`);
  secrets.forEach((secret, index) => {
    const bytes = new TextEncoder().encode(secret).byteLength;
    if (bytes < TOKEN_DEFAULTS.min_secret_bytes) {
      const which = secrets.length === 1 ? 'the secret' : `secret ${index + 1} of 2`;
      throw new ConfigError(`${name}: ${which} is ${bytes} bytes; it must be at least ${TOKEN_DEFAULTS.min_secret_bytes} (e.g. \`openssl rand -base64 48\`)`);
    }
  });
  return secrets;
}

/** Checks a token's scope (the options of `createToken` and of `POST /v1/tokens` but the secret), naming the first problem. */
export function checkTokenScope(options: object, where = 'createToken'): TokenScope & { readonly expires_in_s: number } {
  for (const key of Object.keys(options)) {
    if ((OPTION_KEYS as readonly string[]).includes(key)) continue;
    const nearest = nearestKey(key.replaceAll('-', '_'), [...OPTION_KEYS]);
    throw new ConfigError(`${where}: unknown option '${clipped(key)}'${nearest ? `; did you mean '${nearest}'?` : ''} (options: ${OPTION_KEYS.join(', ')})`);
  }
  const { thread_id, run_id, actions, agents, subject, tenant, expires_in_s } = options as Partial<TokenOptions>;
  if ((thread_id === undefined) === (run_id === undefined)) {
    throw new ConfigError(`${where}: name exactly one of thread_id and run_id (a token is for one thread or one run), got ${thread_id === undefined ? 'neither' : 'both'}`);
  }
  if (thread_id !== undefined && (typeof thread_id !== 'string' || !THREAD_ID_PATTERN.test(thread_id))) {
    throw new ConfigError(`${where}: thread_id must match ${THREAD_ID_PATTERN}, got ${shown(thread_id)}`);
  }
  if (run_id !== undefined && (typeof run_id !== 'string' || !NamePattern.runId.test(run_id))) {
    throw new ConfigError(`${where}: run_id must match ${NamePattern.runId}, got ${shown(run_id)}`);
  }
  if (!Array.isArray(actions) || actions.length === 0) throw new ConfigError(`${where}: actions must be a non-empty list of ${TOKEN_ACTIONS.join(', ')}`);
  for (const action of actions) {
    if (!(TOKEN_ACTIONS as readonly unknown[]).includes(action)) throw new ConfigError(`${where}: unknown action ${shown(action)} (actions: ${TOKEN_ACTIONS.join(', ')})`);
  }
  const sends = actions.includes('send');
  if (sends && run_id !== undefined) throw new ConfigError(`${where}: a token for one run cannot send (enqueue); name a thread_id for send`);
  if (agents !== undefined) {
    if (!sends) throw new ConfigError(`${where}: agents limits send; give it only with the send action`);
    if (!Array.isArray(agents) || agents.length === 0) throw new ConfigError(`${where}: agents must be a non-empty list of agent names`);
    for (const agent of agents) {
      if (typeof agent !== 'string' || !NamePattern.agent.test(agent)) throw new ConfigError(`${where}: agents: ${shown(agent)} is not an agent name (${NamePattern.agent})`);
    }
  } else if (sends) {
    throw new ConfigError(`${where}: send needs agents, the agents the token may enqueue`);
  }
  if (subject !== undefined && (typeof subject !== 'string' || !SUBJECT.test(subject))) {
    throw new ConfigError(
      `${where}: subject must be a string of 1 to ${TOKEN_DEFAULTS.max_subject_length} characters, no control characters, got ${typeof subject === 'string' ? `${subject.length} characters` : shown(subject)}`,
    );
  }
  const tenantProblem = tenant === undefined ? undefined : tenantNameProblem('tenant', tenant);
  if (tenantProblem) throw new ConfigError(`${where}: ${tenantProblem}`);
  const lifetime = expires_in_s ?? TOKEN_DEFAULTS.expires_in_s;
  if (!Number.isInteger(lifetime) || lifetime < 1 || lifetime > TOKEN_DEFAULTS.max_expires_in_s) {
    throw new ConfigError(`${where}: expires_in_s must be an integer from 1 to ${TOKEN_DEFAULTS.max_expires_in_s} (seconds), got ${shown(expires_in_s)}`);
  }
  return {
    ...(thread_id !== undefined ? { thread_id } : { run_id: run_id as string }),
    actions: [...new Set(actions as TokenAction[])],
    ...(agents !== undefined ? { agents: [...new Set(agents)] } : {}),
    ...(subject !== undefined ? { subject } : {}),
    ...(tenant !== undefined ? { tenant } : {}),
    expires_in_s: lifetime,
  };
}

/** The compact claims a token carries beside the registered ones (`sub`, `jti`, `iat`, `exp`). */
export interface ScopeClaims {
  readonly thr?: string;
  readonly run?: string;
  readonly act: readonly TokenAction[];
  readonly agt?: readonly string[];
  readonly ten?: string;
}

export function scopeClaims(scope: TokenScope): ScopeClaims {
  return {
    ...(scope.thread_id !== undefined ? { thr: scope.thread_id } : { run: scope.run_id! }),
    act: scope.actions,
    ...(scope.agents ? { agt: scope.agents } : {}),
    ...(scope.tenant !== undefined ? { ten: scope.tenant } : {}),
  };
}

/**
 * The grant a verified payload stands for, or undefined when its claims are not a token scope
 * (a JWT signed with the right secret but not by arcflow is refused like a tampered one).
 */
export function grantOf(payload: Record<string, unknown>): TokenGrant | undefined {
  const { thr, run, act, agt, ten, sub, jti, exp } = payload;
  if (typeof jti !== 'string' || typeof exp !== 'number') return undefined;
  try {
    const scope = checkTokenScope({
      ...(thr !== undefined ? { thread_id: thr } : {}),
      ...(run !== undefined ? { run_id: run } : {}),
      actions: act,
      ...(agt !== undefined ? { agents: agt } : {}),
      ...(sub !== undefined ? { subject: sub } : {}),
      ...(ten !== undefined ? { tenant: ten } : {}),
    });
    const { expires_in_s: _, ...grant } = scope;
    return { ...grant, token_id: jti, expires_at_s: exp };
  } catch {
    return undefined;
  }
}

function shown(value: unknown): string {
  return (JSON.stringify(value) ?? String(value)).slice(0, 140);
}
