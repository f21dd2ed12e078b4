/**
 * Span names and attribute keys, in one place. GenAI names follow the OpenTelemetry GenAI
 * semantic conventions (development status; see docs/decisions/0004-telemetry.md).
 */
export const SpanName = {
  invokeAgent: (agent: string) => `invoke_agent ${agent}`,
  invokeWorkflow: (workflow: string) => `invoke_workflow ${workflow}`,
  chat: (model: string) => `chat ${model}`,
  executeTool: (tool: string) => `execute_tool ${tool}`,
  process: (queue: string) => `process ${queue}`,
} as const;

export const Attr = {
  operationName: 'gen_ai.operation.name',
  providerName: 'gen_ai.provider.name',
  agentName: 'gen_ai.agent.name',
  workflowName: 'arcflow.workflow.name',
  requestModel: 'gen_ai.request.model',
  /** The request settings a `chat` span carries when set (SPEC §16); no other setting leaves the process. */
  requestTemperature: 'gen_ai.request.temperature',
  requestMaxTokens: 'gen_ai.request.max_tokens',
  requestTopP: 'gen_ai.request.top_p',
  requestSeed: 'gen_ai.request.seed',
  responseModel: 'gen_ai.response.model',
  finishReasons: 'gen_ai.response.finish_reasons',
  inputTokens: 'gen_ai.usage.input_tokens',
  outputTokens: 'gen_ai.usage.output_tokens',
  toolName: 'gen_ai.tool.name',
  toolCallId: 'gen_ai.tool.call.id',
  toolType: 'gen_ai.tool.type',
  errorType: 'error.type',
  runId: 'arcflow.run_id',
  /** The child run an agent tool's call started (SPEC §13). */
  childRunId: 'arcflow.child_run_id',
  stepId: 'arcflow.step_id',
  iteration: 'arcflow.iteration',
  runStatus: 'arcflow.run.status',
  jobAttempt: 'arcflow.job.attempt',
  toolSchemaHash: 'arcflow.tool.input_schema_hash',
  toolInputBytes: 'arcflow.tool.input_size_bytes',
  toolOutputBytes: 'arcflow.tool.output_size_bytes',
  promptBytes: 'arcflow.request.prompt_size_bytes',
  messagingSystem: 'messaging.system',
  messagingOperationName: 'messaging.operation.name',
  messagingOperationType: 'messaging.operation.type',
  messagingDestination: 'messaging.destination.name',
  messagingMessageId: 'messaging.message.id',
} as const;

/** The only span and link attribute keys that may leave the process (the trace data policy). */
export const ALLOWED_ATTRIBUTES: ReadonlySet<string> = new Set(Object.values(Attr));
