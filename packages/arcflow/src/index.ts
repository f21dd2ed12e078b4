/**
 * arcflow: the one package users import. Named re-exports only. Test helpers are in
 * `arcflow/testing`, which nothing here imports.
 */
export {
  Agent,
  Workflow,
  tool,
  ToolArgumentError,
  ConfigError,
  RequestError,
  ErrorCode,
  ProviderFailure,
  TERMINAL_STATUSES,
  TOOL_TERMINAL_KINDS,
  runLocal,
  type AgentConfig,
  type WorkflowConfig,
  type ToolConfig,
  type ToolDefinition,
  type ToolContext,
  type ModelProvider,
  type ProviderRequest,
  type ProviderResponse,
  type TraceEvent,
  type EventKind,
  type RunRecord,
  type RunStatus,
  type RunLocalOptions,
  type LocalRun,
  type RunConfig,
  type ExecConfig,
  type Tokens,
  type ToolLogger,
  type JsonSchema,
} from '@arcflow/core';
export { openaiProvider, type OpenAIProviderOptions } from '@arcflow/provider-openai';
export {
  createClient,
  startWorker,
  type ArcflowClient,
  type ClientOptions,
  type EnqueueRequest,
  type ListQuery,
  type ArcflowWorker,
  type WorkerOptions,
  type WorkerRole,
} from '@arcflow/queue';
