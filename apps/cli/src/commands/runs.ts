import { type OnBusy, RequestError, isPlainObject, type RunInput, type RunRecord, TERMINAL_STATUSES } from '@arcflow/core';
import { type ArcflowClient, CONNECTION_DEFAULTS, createClient, unknownRun } from '@arcflow/queue/client';
import { readCliEnv } from '../env.ts';
import { formatConversation, formatEvent, formatMessage, formatRun, formatRunList, printable } from '../format.ts';
import { readCallOrder } from '../call-order.ts';
import { renderInspectTree } from '../inspect.ts';

/** A client from the environment (REDIS_URL, ARCFLOW_PREFIX), closed after `use`; `use` also gets the connection it was made with. */
export async function withClient<T>(use: (client: ArcflowClient, connection: { redis?: string; prefix?: string }) => Promise<T>): Promise<T> {
  const env = readCliEnv();
  const connection = { redis: env.redis, prefix: env.prefix };
  const client = createClient(connection);
  try {
    return await use(client, connection);
  } finally {
    await client.close();
  }
}

export function parseJsonFlag(flag: string, value: string | undefined): unknown {
  if (value === undefined) return undefined;
  try {
    return JSON.parse(value);
  } catch (error) {
    throw new RequestError('invalid_request', `${flag} is not valid JSON: ${(error as Error).message}`);
  }
}

/** `--state`: the run's initial state, a JSON object (SPEC §17), or a clear refusal naming the flag. */
export function parseStateFlag(value: string | undefined): Record<string, unknown> | undefined {
  const state = parseJsonFlag('--state', value);
  if (state === undefined || isPlainObject(state)) return state as Record<string, unknown> | undefined;
  const got = Array.isArray(state) ? 'an array' : state === null ? 'null' : typeof state;
  throw new RequestError('invalid_request', `--state must be a JSON object (the run's initial state), got ${got}`);
}

/** A flag holding a whole number of milliseconds, or a clear refusal naming it. */
export function wholeMilliseconds(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(Number(value))) {
    throw new RequestError('invalid_request', `${flag} must be a whole number of milliseconds, got ${JSON.stringify(value)}`);
  }
  return Number(value);
}

export interface EnqueueFlags {
  /** The input as a JSON list of chat messages, instead of the <input> argument. */
  'input-json'?: string;
  config?: string;
  'exec-config'?: string;
  /** The run's initial state: a JSON object (SPEC §17). */
  state?: string;
  'idempotency-key'?: string;
  /** The thread the run continues (SPEC §11). */
  thread?: string;
  /** What the run does when its thread is busy: queue (default), steer or reject. */
  'on-busy'?: string;
  /** The run streams the model's text as it is written (SPEC §12). */
  stream?: boolean;
  /** The tenant the run is for, and its priority within the tenant (SPEC §14). */
  tenant?: string;
  priority?: string;
  wait?: boolean;
  json?: boolean;
  'timeout-ms'?: string;
}

/**
 * `arcflow enqueue`: prints the run id; with --wait, the outcome. Exit 1 if the run did not complete.
 * The input is `input`, or the messages of `--input-json` (checked by the client, as any input).
 */
export async function enqueueCommand(agent: string, input: string | undefined, flags: EnqueueFlags): Promise<number> {
  const given = input ?? parseJsonFlag('--input-json', flags['input-json']);
  // A string in --input-json is a plain input given the long way: the flag is for a list of messages.
  if (input === undefined && !Array.isArray(given)) {
    throw new RequestError(
      'invalid_request',
      `--input-json must be a JSON list of chat messages ({ role, content }); give a plain input as the argument after the agent, got ${JSON.stringify(given)?.slice(0, 60)}`,
    );
  }
  // Checked before any connection: a bad --state queues nothing.
  const state = parseStateFlag(flags.state);
  // on_busy only means something on a thread (SPEC §11): without one it would be dropped unseen.
  if (flags['on-busy'] !== undefined && flags.thread === undefined) {
    throw new RequestError('invalid_request', '--on-busy needs --thread: it says what a run does when its thread already has one queued or running');
  }
  const timeoutMs = wholeMilliseconds('--timeout-ms', flags['timeout-ms']);
  // Its range is checked by the client; here only that it is a number.
  if (flags.priority !== undefined && !/^\d+$/.test(flags.priority))
    throw new RequestError('invalid_request', `--priority must be a whole number from 1 to 10, got ${JSON.stringify(flags.priority)}`);
  return withClient(async (client) => {
    const { run_id } = await client.enqueue({
      agent,
      input: given as RunInput,
      config: parseJsonFlag('--config', flags.config),
      exec_config: parseJsonFlag('--exec-config', flags['exec-config']),
      idempotency_key: flags['idempotency-key'],
      // Its size against the agent's max_state_bytes is checked by the client.
      ...(state !== undefined ? { state } : {}),
      // Checked by the client: a bad thread id is an invalid_request naming thread_id.
      ...(flags.thread !== undefined ? { thread_id: flags.thread } : {}),
      ...(flags['on-busy'] !== undefined ? { on_busy: flags['on-busy'] as OnBusy } : {}),
      ...(flags.stream ? { stream: true } : {}),
      ...(flags.tenant !== undefined ? { tenant: flags.tenant } : {}),
      ...(flags.priority !== undefined ? { priority: Number(flags.priority) } : {}),
    });
    if (!flags.wait) {
      console.log(flags.json ? JSON.stringify({ run_id }) : run_id);
      return 0;
    }
    // Said before the wait, which may otherwise last its whole timeout without a word.
    const note = TERMINAL_STATUSES.has((await client.get(run_id))?.status ?? 'queued') ? undefined : await unservedNote(client, agent);
    if (note) console.error(note);
    const waitedMs = timeoutMs ?? 600_000;
    const run = await client.wait(run_id, { timeout_ms: waitedMs });
    console.log(flags.json ? JSON.stringify(run) : formatRun(run));
    if (!TERMINAL_STATUSES.has(run.status)) {
      console.error(`arcflow: run ${run_id} is still ${run.status} after ${waitedMs} ms (--timeout-ms); it goes on: \`arcflow get ${run_id}\` shows it later`);
    }
    return run.status === 'completed' ? 0 : 1;
  });
}

/** `arcflow thread`: a thread's messages (role: text, one a line) and its runs; with --json, `{ thread_id, messages, runs }`. */
export async function threadCommand(thread_id: string, flags: { json?: boolean }): Promise<number> {
  return withClient(async (client) => {
    const thread = client.thread(thread_id);
    const [messages, runs] = await Promise.all([thread.messages(), thread.runs()]);
    if (flags.json) {
      console.log(JSON.stringify({ thread_id, messages, runs }));
      return 0;
    }
    if (messages.length === 0 && runs.length === 0) throw new RequestError('unknown_thread', `unknown thread '${thread_id}'`);
    for (const message of messages) console.log(formatMessage(message));
    console.log(`\nruns (${runs.length}):`);
    for (const run of runs) console.log(`  ${run.run_id}  ${run.status}${run.steered_into ? ` (steered into ${run.steered_into})` : ''}`);
    return 0;
  });
}

export async function getCommand(run_id: string, flags: { json?: boolean }): Promise<number> {
  return withClient(async (client, connection) => {
    const run = await client.get(run_id);
    if (!run) throw unknownRun(run_id, connection.prefix ?? CONNECTION_DEFAULTS.prefix);
    console.log(flags.json ? JSON.stringify(run) : formatRun(run));
    await warnIfUnserved(client, run);
    return 0;
  });
}

export async function eventsCommand(run_id: string, flags: { follow?: boolean; json?: boolean }): Promise<number> {
  return withClient(async (client, connection) => {
    if (!(await client.get(run_id))) throw unknownRun(run_id, connection.prefix ?? CONNECTION_DEFAULTS.prefix);
    for await (const event of client.events(run_id, { follow: flags.follow })) {
      console.log(flags.json ? JSON.stringify(event) : formatEvent(event));
    }
    return 0;
  });
}

/** `arcflow inspect`: the run as a tree; with --messages, its conversation step by step instead (--json: `{ run_id, messages, steps? }`). */
export async function inspectCommand(run_id: string, flags: { messages?: boolean; json?: boolean } = {}): Promise<number> {
  if (flags.messages) return messagesCommand(run_id, flags);
  return withClient(async (client, connection) => {
    const run = await client.get(run_id);
    if (!run) throw unknownRun(run_id, connection.prefix ?? CONNECTION_DEFAULTS.prefix);
    const events = [];
    for await (const event of client.events(run_id)) events.push(event);
    console.log(renderInspectTree(run, events, await readCallOrder(connection, run_id, events)));
    await warnIfUnserved(client, run);
    return 0;
  });
}

/** What a run's tools received and returned, and what the model answered: the content events never hold. */
async function messagesCommand(run_id: string, flags: { json?: boolean }): Promise<number> {
  return withClient(async (client) => {
    const conversation = await client.messages(run_id);
    if (flags.json) {
      console.log(JSON.stringify(conversation));
      return 0;
    }
    if (!conversation.steps) console.log(conversation.messages.length > 0 ? formatConversation(conversation.messages) : 'no messages yet');
    else if (conversation.steps.length === 0) console.log('no messages yet');
    for (const step of conversation.steps ?? []) console.log(`step ${printable(step.step_id)}\n${formatConversation(step.messages)}`);
    return 0;
  });
}

export async function cancelCommand(run_id: string): Promise<number> {
  return withClient(async (client) => {
    const { cancelled, status } = await client.cancel(run_id);
    console.log(cancelled ? `cancelled ${run_id}` : `${run_id} had already ended (${status})`);
    return 0;
  });
}

/** `arcflow approve`: approves (or with --reject, rejects) a call waiting for a person. */
export async function approveCommand(run_id: string, tool_call_id: string, flags: { reject?: boolean; reason?: string; by?: string; json?: boolean }): Promise<number> {
  return withClient(async (client) => {
    const answer = { approved: !flags.reject, ...(flags.reason !== undefined ? { reason: flags.reason } : {}), ...(flags.by !== undefined ? { by: flags.by } : {}) };
    const resolution = await client.approve(run_id, tool_call_id, answer);
    if (flags.json) console.log(JSON.stringify(resolution));
    else {
      const how = resolution.timed_out ? 'timed out' : resolution.approved ? 'approved' : 'rejected';
      const same = resolution.approved !== answer.approved || resolution.timed_out ? ' (resolved before; that stands)' : '';
      console.log(`${tool_call_id} ${how}${resolution.by ? ` by ${resolution.by}` : ''}${resolution.reason ? `: ${resolution.reason}` : ''}${same}`);
    }
    return 0;
  });
}

export interface RunsFlags {
  status?: string;
  agent?: string;
  tenant?: string;
  limit?: string;
  cursor?: string;
  json?: boolean;
}

/** `arcflow runs`: the runs still retained, newest first; `--json` prints `{ runs, next_cursor }`. */
export async function runsCommand(flags: RunsFlags): Promise<number> {
  return withClient(async (client) => {
    const limit = flags.limit === undefined ? undefined : Number(flags.limit);
    if (flags.limit !== undefined && !/^\d+$/.test(flags.limit)) throw new RequestError('invalid_request', `--limit must be a whole number, got ${JSON.stringify(flags.limit)}`);
    const page = await client.list({
      status: flags.status as never,
      agent: flags.agent,
      ...(flags.tenant !== undefined ? { tenant: flags.tenant } : {}),
      limit,
      cursor: flags.cursor,
    });
    if (flags.json) {
      console.log(JSON.stringify(page));
      return 0;
    }
    console.log(formatRunList(page.runs));
    if (page.next_cursor)
      console.log(
        `more: arcflow runs --cursor ${page.next_cursor}${flags.status ? ` --status ${flags.status}` : ''}${flags.agent ? ` --agent ${flags.agent}` : ''}${flags.tenant ? ` --tenant ${flags.tenant}` : ''}`,
      );
    return 0;
  });
}

/** A run not ended whose agent no live worker serves waits in its queue: say so, on stderr (so `--json` stays JSON). */
async function warnIfUnserved(client: ArcflowClient, run: RunRecord): Promise<void> {
  if (TERMINAL_STATUSES.has(run.status) || !run.agent) return;
  const note = await unservedNote(client, run.agent);
  if (note) console.error(note);
}

/** The note for a run of `agent` when no live worker serves it now, else undefined. */
async function unservedNote(client: ArcflowClient, agent: string): Promise<string | undefined> {
  const known = (await client.agents()).find((registered) => registered.name === agent);
  if (known && known.live_workers > 0) return undefined;
  return `note: no live worker serves agent '${agent}' now; the run waits in its queue until one starts (arcflow worker --module <file>)`;
}
