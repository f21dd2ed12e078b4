/**
 * arcflow: the one package users import. Named re-exports only.
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
} from '@arcflow/core';
export { openaiProvider, type OpenAIProviderOptions } from '@arcflow/provider-openai';
export { scriptedProvider, reply, toolCall, toolCalls, startFakeOpenAI } from '@arcflow/testing';
export { createClient, startWorker, type ArcflowClient, type ClientOptions, type EnqueueRequest, type ArcflowWorker, type WorkerOptions, type WorkerRole } from '@arcflow/queue';
