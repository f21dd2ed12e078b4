/** Defaults of the loop's configuration, one frozen object per concern. */
export const TOOL_EXECUTION_DEFAULTS = Object.freeze({
  mode: 'llm_select' as const,
  max_iterations: 8,
  on_max_iterations: 'fail' as const,
});

export const LOOP_DETECTION_DEFAULTS = Object.freeze({
  window: 3,
  threshold: 2,
  action: 'inject' as const,
});

/** Structured output (SPEC §11): how many more calls a step may make after an answer that fails its output schema. */
export const OUTPUT_DEFAULTS = Object.freeze({
  retries: 2,
});

export const TOOL_DEFAULTS = Object.freeze({
  timeout_ms: 30_000,
  retries: 0,
  max_result_bytes: 64 * 1024,
  approval_timeout_ms: 24 * 3600 * 1000,
  /** How long a call waits for its result from outside (SPEC §20), and the most a tool may set. */
  result_timeout_ms: 24 * 3600 * 1000,
  max_result_timeout_ms: 30 * 24 * 3600 * 1000,
});

/** Provider retry policy used by the in-process runner (the engine maps it onto BullMQ attempts). */
export const PROVIDER_RETRY_DEFAULTS = Object.freeze({
  attempts: 5,
  backoff_ms: 1_000,
  max_backoff_ms: 30_000,
  /** 429 waits allowed per provider call beyond its attempts (a 429 spends no attempt). */
  rate_limit_waits: 50,
});

/** Largest run input accepted, in bytes of UTF-8 (a list of messages: of its JSON text). */
export const MAX_INPUT_BYTES = 256 * 1024;

/**
 * Limits of a run's input messages (SPEC §11) besides the whole input's {@link MAX_INPUT_BYTES}.
 * An image URL is checked on its own so that its refusal names it: a `data:` URL (the image
 * itself) may take most of the input, leaving room for the text around it; an `http(s):` URL
 * longer than servers accept is a mistake.
 */
export const INPUT_MESSAGE_LIMITS = Object.freeze({
  max_data_url_bytes: 192 * 1024,
  max_url_bytes: 8 * 1024,
});

/** Largest tool-call arguments accepted from the model, in bytes; larger calls are answered as invalid. */
export const MAX_ARGUMENT_BYTES = 256 * 1024;

/** Most tool calls one model response may ask for; a response with more is malformed (and retried). */
export const MAX_TOOL_CALLS_PER_RESPONSE = 256;

/**
 * Most bytes (UTF-8) of text and tool-call arguments one model response may carry together
 * (arguments over {@link MAX_ARGUMENT_BYTES} are dropped first); a response with more is malformed (and retried).
 */
export const MAX_RESPONSE_BYTES = 4 * 1024 * 1024;
