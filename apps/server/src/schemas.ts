import { Type } from '@fastify/type-provider-typebox';
import { TENANT_PATTERN, THREAD_ID_PATTERN } from '@arcflow/core';

/** The request and response shapes of the API: validation and the OpenAPI document both come from these. */

const open = { additionalProperties: true } as const;

export const Problem = Type.Object(
  {
    type: Type.String(),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.String(),
    code: Type.String({ description: "the same code as the TypeScript client's error" }),
  },
  { $id: 'Problem', description: 'application/problem+json (RFC 9457) with arcflow error code' },
);

export const Tokens = Type.Object({ input: Type.Integer(), output: Type.Integer(), total: Type.Integer() }, { $id: 'Tokens' });

export const RunError = Type.Object({ code: Type.String(), error_code: Type.String(), message: Type.String() }, { $id: 'RunError' });

/** A run's state (SPEC §17): a JSON object kept beside its messages; its values are the program's own. */
const RunState = (description: string) => Type.Object({}, { additionalProperties: true, description });

/** A chat message as the run's conversation holds it (chat-completions shape). */
export const ChatMessage = Type.Object({ role: Type.String() }, open);

/** `GET /v1/runs/{run_id}/messages`: the content that events and spans never hold. */
export const RunMessages = Type.Object({
  run_id: Type.String(),
  messages: Type.Array(ChatMessage, {
    description:
      "an agent run's conversation, in order: its instructions (system), the input, the assistant turns with their tool calls, the tool results, then the final answer once it completed; a run on a thread leaves out the thread's earlier messages; empty for a workflow run (see steps)",
  }),
  steps: Type.Optional(
    Type.Array(Type.Object({ step_id: Type.String(), messages: Type.Array(ChatMessage) }), {
      description: "a workflow run's agent steps that have begun, each with its conversation",
    }),
  ),
});

/** A call waiting for something outside (an approval, a result), as a run's record lists it. */
const PendingCall = Type.Object({
  step_id: Type.String(),
  iteration: Type.Integer(),
  tool_call_id: Type.String(),
  tool_name: Type.String(),
  arguments: Type.Unknown(),
  requested_at: Type.Integer(),
  expires_at: Type.Integer(),
});

export const RunRecord = Type.Object(
  {
    run_id: Type.String(),
    status: Type.Union(['queued', 'running', 'waiting', 'completed', 'failed', 'cancelled'].map((status) => Type.Literal(status))),
    agent: Type.Optional(Type.String()),
    workflow: Type.Optional(Type.String()),
    output: Type.Optional(Type.String()),
    output_json: Type.Optional(Type.Unknown({ description: "the output parsed, when the run's agent had an output_schema" })),
    error: Type.Optional(Type.Ref('RunError')),
    usage: Type.Object({
      input: Type.Integer(),
      output: Type.Integer(),
      total: Type.Integer(),
      cost_usd: Type.Optional(Type.Number({ description: "what its calls of priced models cost, its child runs' included, in USD (SPEC §14)" })),
    }),
    iterations: Type.Integer(),
    created_at: Type.Integer({ description: 'epoch ms' }),
    finished_at: Type.Optional(Type.Integer({ description: 'epoch ms' })),
    trace_id: Type.Optional(Type.String({ description: "the run's OpenTelemetry trace id" })),
    thread_id: Type.Optional(Type.String({ description: 'the thread the run is on' })),
    enqueued_by: Type.Optional(Type.String({ description: "who enqueued it, when known: token:<subject> for a run enqueued with an end user's token" })),
    tenant: Type.Optional(Type.String({ description: 'the tenant it was enqueued for (a run with none is the default tenant’s)' })),
    priority: Type.Optional(Type.Integer({ description: 'its priority within its tenant, when one was given: 1 (first) to 10' })),
    parent_run_id: Type.Optional(Type.String({ description: 'a child run (SPEC §13): the run whose agent tool call started it' })),
    parent_tool_call_id: Type.Optional(Type.String({ description: "a child run: the parent's call that started it" })),
    steered_into: Type.Optional(Type.String({ description: 'on_busy: steer — the active run of the thread its input was given to' })),
    steered_from: Type.Optional(
      Type.Array(Type.String(), { description: 'a run that took input steered into a run that ended without it reaching the thread: the steering runs' }),
    ),
    pending_approvals: Type.Optional(Type.Array(PendingCall, { description: 'calls waiting for approval, with their arguments (for approvers; never in events)' })),
    pending_tool_results: Type.Optional(
      Type.Array(PendingCall, {
        description: 'calls waiting for their result from outside (SPEC §20), with their arguments (for whoever answers; never in events)',
      }),
    ),
    steps: Type.Optional(
      Type.Record(Type.String(), Type.Object({ status: Type.String(), output: Type.Optional(Type.String()), error: Type.Optional(Type.Ref('RunError')) }, open)),
    ),
    state: Type.Optional(RunState("the run's state as its last round left it ({} when none was set); events hold its key names only")),
    forked_from: Type.Optional(
      Type.Object(
        { run_id: Type.String(), step_id: Type.String(), iteration: Type.Integer() },
        { description: 'a fork (SPEC §15): the run, step and iteration it was forked from' },
      ),
    ),
    retried_by: Type.Optional(Type.String({ description: 'a failed or cancelled run that was retried: its retry (a run is retried once)' })),
  },
  { $id: 'RunRecord', ...open },
);

export const TraceEvent = Type.Object(
  { kind: Type.String(), run_id: Type.String(), step_id: Type.String(), seq: Type.Integer(), ts: Type.Integer(), iteration: Type.Optional(Type.Integer()) },
  { $id: 'TraceEvent', description: 'a trace event (SPEC §4): the common fields, then those of its kind', ...open },
);

export const EnqueueBody = Type.Object(
  {
    agent: Type.String({ description: 'an agent or workflow name', minLength: 1, maxLength: 100 }),
    // Checked by the client, not here, so that a refusal names the message and field (`input[2].role: …`),
    // and untyped here since Fastify's type coercion would turn a one-message list into something else.
    input: Type.Unknown({
      description:
        "a string (one user message), or a list of chat messages { role: 'user' | 'assistant' | 'system' | 'developer' | 'tool', content, … } with content a string or a list of { type: 'text', text } and { type: 'image_url', image_url: { url } } parts; a workflow takes a string",
      examples: [
        'Weather in Oslo?',
        [
          {
            role: 'user',
            content: [
              { type: 'text', text: 'What is this?' },
              { type: 'image_url', image_url: { url: 'https://example.com/cat.jpg' } },
            ],
          },
        ],
      ],
    }),
    config: Type.Optional(Type.Unknown()),
    exec_config: Type.Optional(Type.Unknown({ description: "test mode: needs the 'admin' scope" })),
    state: Type.Optional(
      RunState(
        "the run's initial state: a JSON object of at most the agent's max_state_bytes (default 262144 bytes of its JSON); default {}, or on a thread the state its last completed run left",
      ),
    ),
    // Checked by the client, so the API refuses it in the client's words (SPEC §8).
    idempotency_key: Type.Optional(Type.String({ description: '1-200 characters of letters, digits, _ . -' })),
    thread_id: Type.Optional(
      Type.String({
        pattern: THREAD_ID_PATTERN.source,
        description: "the thread the run continues: it runs on the thread's conversation so far, and appends its messages when it completes",
      }),
    ),
    on_busy: Type.Optional(
      Type.Union([Type.Literal('queue'), Type.Literal('steer'), Type.Literal('reject')], { description: 'when the thread has a run queued or running (default queue)' }),
    ),
    stream: Type.Optional(
      Type.Boolean({
        description:
          "stream the model's text as it is written (default: as the agent is defined, else false); a run that does not stream gives each iteration's text whole on its stream",
      }),
    ),
    tenant: Type.Optional(
      Type.String({
        pattern: TENANT_PATTERN.source,
        description: "the tenant the run is for: each tenant gets its share of the workers (default: the tenant 'default'); a token naming a tenant sets it",
      }),
    ),
    priority: Type.Optional(Type.Integer({ description: 'the run’s priority within its tenant: 1 (first) to 10 (default 5); checked by the client' })),
  },
  { additionalProperties: false },
);

export const RunIdParams = Type.Object({ run_id: Type.String({ minLength: 1, maxLength: 100 }) });

export const ApprovalParams = Type.Object({ run_id: Type.String({ minLength: 1, maxLength: 100 }), tool_call_id: Type.String({ minLength: 1, maxLength: 64 }) });

export const ApprovalBody = Type.Object(
  {
    approved: Type.Boolean(),
    reason: Type.Optional(Type.String({ maxLength: 2_000, description: 'told to the model when the call is rejected' })),
    by: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
  },
  { additionalProperties: false },
);

/** A result from outside (SPEC §20): exactly one of `output` (any JSON value) and `error` (at most 4 KiB). */
export const ToolResultBody = Type.Union(
  [
    Type.Object(
      { output: Type.Unknown({ description: "the call's output: any JSON value (a string is the text itself), checked against the tool's output_schema" }) },
      { additionalProperties: false },
    ),
    Type.Object({ error: Type.String({ maxLength: 4_096, description: 'fails the call: the model reads `Error: <error>`' }) }, { additionalProperties: false }),
  ],
  { description: '{ output } or { error }' },
);

export const ToolResultAnswer = Type.Object({
  status: Type.Union([Type.Literal('completed'), Type.Literal('failed')], { description: "the call's outcome" }),
  answered_at: Type.Integer({ description: 'epoch ms of the first answer' }),
});

export const ApprovalResolution = Type.Object({
  approved: Type.Boolean(),
  by: Type.Optional(Type.String()),
  reason: Type.Optional(Type.String()),
  resolved_at: Type.Integer(),
  timed_out: Type.Optional(Type.Boolean()),
});

export const ListQuery = Type.Object(
  {
    status: Type.Optional(Type.String()),
    agent: Type.Optional(Type.String()),
    tenant: Type.Optional(Type.String()),
    limit: Type.Optional(Type.Integer({ description: '1 to 1000 (default 50); checked by the client' })),
    cursor: Type.Optional(Type.String()),
  },
  { additionalProperties: false },
);

export const RunList = Type.Object({ runs: Type.Array(Type.Ref('RunRecord')), next_cursor: Type.Optional(Type.String()) });

export const Agents = Type.Object({
  agents: Type.Array(
    Type.Object({
      name: Type.String(),
      kind: Type.Union([Type.Literal('agent'), Type.Literal('workflow')]),
      tools: Type.Array(Type.String()),
      live_workers: Type.Integer(),
      steps: Type.Optional(
        Type.Array(Type.Object({ id: Type.String(), type: Type.Union([Type.Literal('agent'), Type.Literal('tool')]), depends_on: Type.Array(Type.String()) }), {
          description: "a workflow's steps",
        }),
      ),
    }),
  ),
});

export const Queues = Type.Object({
  queues: Type.Array(
    Type.Object({ name: Type.String(), waiting: Type.Integer(), active: Type.Integer(), delayed: Type.Integer(), failed: Type.Integer(), workers: Type.Integer() }),
  ),
});

/** Every route's error answers. */
export const problems = (...statuses: number[]) => Object.fromEntries(statuses.map((status) => [status, Type.Ref('Problem')]));

export const StreamQuery = Type.Object({
  after: Type.Optional(Type.String({ pattern: '^[0-9]{1,15}$', description: 'resume after this offset (Last-Event-ID wins when both are sent)' })),
  format: Type.Optional(Type.Literal('ai-sdk', { description: "the AI SDK's UI message stream protocol instead of the run's chunks" })),
});

export const StreamChunk = Type.Object(
  {
    offset: Type.Integer({ minimum: 1 }),
    type: Type.Union(['text', 'tool_call', 'tool_result', 'tool_input', 'tool_approval', 'reset', 'end'].map((type) => Type.Literal(type))),
    step_id: Type.Optional(Type.String()),
    iteration: Type.Optional(Type.Integer()),
    attempt: Type.Optional(Type.Integer()),
    delta: Type.Optional(Type.String()),
    tool_call_id: Type.Optional(Type.String()),
    tool_name: Type.Optional(Type.String()),
    status: Type.Optional(Type.String()),
    input: Type.Optional(Type.Unknown({ description: "tool_input: the call's arguments (an external tool's only, SPEC §20)" })),
  },
  { $id: 'StreamChunk', description: "a chunk of a run's stream (SPEC §12); an SSE message's data:", ...open },
);
