export { ErrorCode, ConfigError, ToolArgumentError, ToolAnswerError, RequestError, type ToolFailureCode } from './errors.ts';
export { canonicalJson, shortHash, byteSize } from './canonical.ts';
export { isPlainObject } from './plain-object.ts';
export {
  TOOL_EXECUTION_DEFAULTS,
  LOOP_DETECTION_DEFAULTS,
  TOOL_DEFAULTS,
  OUTPUT_DEFAULTS,
  PROVIDER_RETRY_DEFAULTS,
  MAX_INPUT_BYTES,
  INPUT_MESSAGE_LIMITS,
  MAX_ARGUMENT_BYTES,
  MAX_TOOL_CALLS_PER_RESPONSE,
  MAX_RESPONSE_BYTES,
} from './defaults.ts';
export { compileSchema, describeViolations, loadSchemaValidator, UNDECLARED_PROPERTY } from './tools/schema.ts';
export {
  tool,
  type ToolConfig,
  type ToolDefinition,
  type ToolContext,
  type ToolHandler,
  type ToolLogger,
  type ApprovalContext,
  type NeedsApproval,
  type ToolOptions,
  type ResolvedToolOptions,
  resolveToolOptions,
  TOOL_OPTION_KEYS,
} from './tools/define.ts';
export { toolDefinitionHash } from './definitions/definition-hash.ts';
export { type ToolSource, type ToolSourceSession, type SessionResource, isToolSource } from './tools/source.ts';
export { type OpenedDefinitions, openToolSources } from './tools/open-sources.ts';
export {
  agentTool,
  childOf,
  childAgentsOf,
  childBudget,
  type BudgetCaps,
  type AgentToolConfig,
  type ChildAgent,
  AGENT_TOOL_INPUT_SCHEMA,
  DEFAULT_MAX_DEPTH,
} from './definitions/agent-tool.ts';
export { ToolResultText, serialiseResult, truncateResult } from './tools/result-text.ts';
export { runHandler, idempotencyKey, watchSignal, type CancelWatch, type HandlerOutcome, type HandlerCall } from './tools/run-handler.ts';
export { Agent, type AgentConfig } from './definitions/agent.ts';
export {
  type RunState,
  type StateChange,
  type StateAccess,
  CallState,
  DEFAULT_MAX_STATE_BYTES,
  applyStateChanges,
  applyStateChangesSized,
  changesFit,
  stateSize,
  checkInitialState,
  stateAsChanges,
  readStateChanges,
} from './state/run-state.ts';
export {
  Workflow,
  type WorkflowConfig,
  type WorkflowStepConfig,
  type WorkflowStep,
  type AgentStepConfig,
  type ToolStepConfig,
  type StepInputs,
  type StepFailurePolicy,
} from './definitions/workflow.ts';
export { type KnownKeys, type KeysOwner, checkKnownKeys, clipped, nearestKey } from './definitions/known-keys.ts';
export {
  type ModelSettings,
  type ModelFallback,
  type ToolChoice,
  MAX_MODEL_FALLBACKS,
  MAX_EXTRA_BODY_BYTES,
  checkModelSettings,
  checkModelFallbacks,
  checkToolChoice,
  mergeModelSettings,
  settingsForCall,
} from './definitions/model-settings.ts';
export { type ResolvedOutput, type ResponseFormat, resolveOutput, responseFormatFor, fitsStrictSubset } from './definitions/output-schema.ts';
export {
  type AnswerDecision,
  type OutputCheck,
  OUTPUT_NOT_JSON,
  invalidOutputMessage,
  checkOutput,
  decideAnswer,
  decideFixedOutput,
  applyOutputRepair,
} from './loop/output.ts';
export { type ModelTarget, modelTargets, requestFor, providerFor } from './loop/model-targets.ts';
export { FIRST_TRY, type NextTry, type TryPolicy, type TryPosition, afterFailedTry, entryElsewhere } from './loop/provider-tries.ts';
export * from './workflow/graph.ts';
export * from './workflow/request.ts';
export * from './workflow/step-events.ts';
export * from './workflow/step-inputs.ts';
export {
  checkRunConfig,
  resolveSettings,
  type RunConfig,
  type StepSettings,
  type ToolExecutionConfig,
  type LoopDetectionConfig,
  type BudgetConfig,
  type ResolvedBudget,
} from './definitions/settings.ts';
export * from './events/types.ts';
export { EVENT_FIELDS, applyTracePolicy } from './events/policy.ts';
export * from './provider.ts';
export * from './vocabulary/messages.ts';
export * from './vocabulary/tokens.ts';
export * from './cost/pricing.ts';
export * from './cost/call-cost.ts';
export type { JsonSchema } from './vocabulary/json-schema.ts';
export { type StreamChunk, type StreamChunkType, readStreamChunk } from './streams/chunks.ts';
export { type IterationText, StreamReassembler } from './streams/reassemble.ts';
export * from './run-record.ts';
export { type StepState, initialStepState } from './loop/state.ts';
export { type RunInput, checkRunInput, checkWorkflowInput, inputMessages } from './conversation/messages.ts';
export { OnBusy, THREAD_ID_PATTERN, checkOnBusy, checkThreadId } from './conversation/threads.ts';
export {
  type ResponseDecision,
  FINAL_ANSWER_NOTE,
  buildRequest,
  requestSentEvent,
  responseEvents,
  decideResponse,
  decidedEvents,
  applyToolRound,
  applyFinalAnswerNote,
  usageWith,
  executedCalls,
} from './loop/decide.ts';
export {
  type PlannedCall,
  type ExecuteCall,
  type RejectCall,
  type RepeatCall,
  planCall,
} from './loop/plan.ts';
export { type ParsedArguments, MAX_ARGUMENT_DEPTH, parseArguments, unrepresentableArguments } from './loop/arguments.ts';
export { MAX_TOKENS_PER_CALL, normalizeResponse } from './loop/normalize.ts';
export { NamePattern } from './names.ts';
export { callSignature } from './loop/loop-detection.ts';
export * from './loop/tool-events.ts';
export * from './loop/step-events.ts';
export * from './loop/test-mode.ts';
export * from './loop/approvals.ts';
export * from './loop/tool-results.ts';
export { runLocal } from './runner/run-local.ts';
export type { RunLocalOptions, LocalRun } from './runner/local-options.ts';
export { LocalEventLog } from './runner/event-log.ts';
export { MAX_RETRY_AFTER_SECONDS, backoffMs, providerRetryDelayMs, sleep } from './runner/backoff.ts';
export { stderrLogger, silentLogger } from './logger.ts';
export { jsonProblem, checkRequestJson, REQUEST_JSON_LIMITS } from './json-limits.ts';
export { describeError, logLine, loggable, withFields } from './logger.ts';
export {
  TOKEN_ACTIONS,
  TOKEN_DEFAULTS,
  TENANT_PATTERN,
  tenantNameProblem,
  type TokenAction,
  type TokenScope,
  type TokenOptions,
  type TokenGrant,
  checkTokenScope,
  tokenSecrets,
} from './tokens/claims.ts';
export { type TokenKeys, type TokenVerdict, createToken, tokenKeys, signToken, verifyToken, looksLikeToken } from './tokens/jwt.ts';
