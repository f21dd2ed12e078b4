import { type RunInput, type RunRecord, TERMINAL_STATUSES, type TraceEvent } from '@arcflow/core';
import type { ArcflowClient } from '@arcflow/queue';
import { type EnqueueRequest, checkEnqueueNames, unknownRun } from '@arcflow/queue/client';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { Type } from '@fastify/type-provider-typebox';
import { allows } from '../auth.ts';
import { type EventHub, endsRun } from '../event-hub.ts';
import { HttpProblem } from '../problems.ts';
import { enqueuedBy } from '../tokens.ts';
import { ApprovalBody, ApprovalParams, ApprovalResolution, EnqueueBody, ListQuery, RunIdParams, RunList, RunMessages, problems } from '../schemas.ts';
import { openEventStream } from '../sse.ts';

export interface RunRoutesOptions {
  readonly client: ArcflowClient;
  readonly hub: EventHub;
  readonly heartbeat_ms: number;
  /** The key prefix runs are looked for under (named when one is unknown, as the client names it). */
  readonly key_prefix: string;
}

/** `/v1/runs`: enqueue, list, read, follow and cancel runs. */
export const runRoutes: FastifyPluginAsyncTypebox<RunRoutesOptions> = async (app, { client, hub, heartbeat_ms, key_prefix }) => {
  enqueueRoute(app, client);

  app.get(
    '/v1/runs',
    { config: { scope: 'read' }, schema: { summary: 'List runs, newest first', querystring: ListQuery, response: { 200: RunList, ...problems(400, 401, 429, 503) } } },
    async (request) => client.list(request.query as Parameters<ArcflowClient['list']>[0]),
  );

  app.get(
    '/v1/runs/:run_id',
    { config: { scope: 'read' }, schema: { summary: 'A run record', params: RunIdParams, response: { 200: Type.Ref('RunRecord'), ...problems(400, 401, 404, 429, 503) } } },
    async (request) => existingRun(client, request.params.run_id, key_prefix),
  );

  eventsRoute(app, { client, hub, heartbeat_ms, key_prefix });

  app.get(
    '/v1/runs/:run_id/messages',
    {
      config: { scope: 'read' },
      schema: {
        summary: "A run's conversation, step by step: the input, the assistant turns with their tool calls, the tool results, the final answer",
        params: RunIdParams,
        response: { 200: RunMessages, ...problems(400, 401, 404, 429, 503) },
      },
    },
    async (request) => client.messages(request.params.run_id),
  );

  app.post(
    '/v1/runs/:run_id/approvals/:tool_call_id',
    {
      config: { scope: 'write' },
      schema: {
        summary: 'Approve or reject a call waiting for a person; answering again returns the first resolution',
        params: ApprovalParams,
        body: ApprovalBody,
        response: { 200: ApprovalResolution, ...problems(400, 401, 403, 404, 409, 429, 503) },
      },
    },
    async (request) => client.approve(request.params.run_id, request.params.tool_call_id, request.body),
  );

  app.post(
    '/v1/runs/:run_id/cancel',
    {
      config: { scope: 'write' },
      schema: {
        summary: 'Cancel a run',
        params: RunIdParams,
        response: { 200: Type.Object({ cancelled: Type.Boolean(), status: Type.String() }), ...problems(400, 401, 403, 404, 429, 503) },
      },
    },
    async (request) => client.cancel(request.params.run_id),
  );
};

/** The app a plugin of these routes is given. */
type App = Parameters<FastifyPluginAsyncTypebox<RunRoutesOptions>>[0];

/** `POST /v1/runs`: enqueue a run; with a token, the run is the token's (its subject, its tenant). */
function enqueueRoute(app: App, client: ArcflowClient): void {
  app.post(
    '/v1/runs',
    {
      config: { scope: 'write' },
      // Before the schema: an unknown field is refused naming the nearest known one, not as
      // "additional properties", and the names and flags in the client's words (SPEC §8).
      preValidation: async (request) => {
        const body = request.body;
        if (body === null || typeof body !== 'object' || Array.isArray(body)) return;
        if (Object.hasOwn(body, 'enqueued_by')) {
          throw new HttpProblem(400, 'invalid_request', "enqueued_by is not a field of the request: the server records who enqueued (the API key's name, or the token's subject)");
        }
        checkEnqueueNames(body as EnqueueRequest);
      },
      schema: {
        summary: 'Enqueue a run of an agent or workflow',
        body: EnqueueBody,
        response: {
          200: Type.Object({ run_id: Type.String() }, { description: 'an earlier run with this idempotency key' }),
          201: Type.Object({ run_id: Type.String() }),
          ...problems(400, 401, 403, 404, 409, 413, 429, 503),
        },
      },
    },
    async (request, reply) => {
      const { exec_config } = request.body;
      if (exec_config !== undefined && exec_config !== null && !allows(request.caller!, 'admin')) {
        throw new HttpProblem(403, 'forbidden', "test mode (exec_config) needs a key with the 'admin' scope");
      }
      // The input's messages are checked by the client (SPEC §11), as for any caller; so is the
      // state's size against the agent's max_state_bytes (SPEC §17), the schema having made it an object.
      const { run_id, created } = await client.enqueue({
        ...request.body,
        input: request.body.input as RunInput,
        state: request.body.state as Readonly<Record<string, unknown>> | undefined,
        // A token's run says whose it is (SPEC §19); the token's other checks were made before the schema's.
        ...(request.grant ? { enqueued_by: enqueuedBy(request.grant) } : {}),
        // A token that names a tenant makes every run it enqueues that tenant's (a body naming another was refused 403).
        ...(request.grant?.tenant !== undefined ? { tenant: request.grant.tenant } : {}),
      });
      return reply.status(created ? 201 : 200).send({ run_id });
    },
  );
}

/** `GET /v1/runs/{run_id}/events`: the events as JSON, or live over SSE from Last-Event-ID. */
function eventsRoute(app: App, { client, hub, heartbeat_ms, key_prefix }: RunRoutesOptions): void {
  app.get(
    '/v1/runs/:run_id/events',
    {
      config: { scope: 'read' },
      schema: {
        summary: "A run's trace events: a JSON array, or with Accept: text/event-stream a live stream (id: seq, event: kind) that resumes after Last-Event-ID",
        params: RunIdParams,
        headers: Type.Object({ 'last-event-id': Type.Optional(Type.String({ pattern: '^[0-9]{1,9}$' })) }),
        response: { 200: Type.Array(Type.Ref('TraceEvent')), ...problems(400, 401, 404, 429, 503) },
      },
    },
    async (request, reply) => {
      const { run_id } = request.params;
      const run = await existingRun(client, run_id, key_prefix);
      const after = Number(request.headers['last-event-id'] ?? 0);
      if (!(request.headers.accept ?? '').includes('text/event-stream')) return readEvents(client, run_id, 0);
      const stream = openEventStream(reply, heartbeat_ms);
      // A log that cannot be read ends the stream (the cause goes to the log): it never will be.
      const unreadable = (error: unknown) => request.log.warn({ err: error, run_id }, 'run events cannot be read');
      if (TERMINAL_STATUSES.has(run.status)) {
        // An ended run's log is complete: what is left after Last-Event-ID, then the end of the stream.
        await readEvents(client, run_id, after).then((events) => stream.send(events), unreadable);
        stream.end();
        return reply;
      }
      const stop = hub.follow(
        run_id,
        after,
        (events) => {
          stream.send(events);
          if (endsRun(events)) stream.end();
        },
        (error) => {
          unreadable(error);
          stream.end();
        },
      );
      stream.onClose(stop);
      return reply;
    },
  );
}

/** The run's events after seq `after`. */
async function readEvents(client: ArcflowClient, run_id: string, after: number): Promise<TraceEvent[]> {
  const events: TraceEvent[] = [];
  for await (const event of client.events(run_id)) if (event.seq > after) events.push(event);
  return events;
}

/** The run's record, or a 404 problem naming it and the prefix it was looked for under, as the client's error does. */
async function existingRun(client: ArcflowClient, run_id: string, key_prefix: string): Promise<RunRecord> {
  const run = await client.get(run_id);
  if (!run) throw new HttpProblem(404, 'unknown_run', unknownRun(run_id, key_prefix).message);
  return run;
}
