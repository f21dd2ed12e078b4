import { ConfigError, RequestError } from '@arcflow/core';

/** An `application/problem+json` body (RFC 9457) with arcflow's error `code`. */
export interface Problem {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  readonly detail: string;
  readonly code: string;
}

/** An error the API answers with its status and code. */
export class HttpProblem extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** HTTP status per client error code: the client's messages, with a status a caller can act on. */
const STATUS_OF_CODE: Readonly<Record<string, number>> = {
  unknown_agent: 404,
  unknown_run: 404,
  unknown_thread: 404,
  invalid_request: 400,
  invalid_input: 400,
  invalid_run_id: 400,
  invalid_config: 400,
  input_too_large: 413,
  payload_too_large: 413,
  redis_unavailable: 503,
  not_pending: 409,
  not_waiting: 409,
  thread_busy: 409,
  idempotency_conflict: 409,
  tenant_rate_limited: 429,
};

const TITLES: Readonly<Record<number, string>> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  409: 'Conflict',
  413: 'Content Too Large',
  414: 'URI Too Long',
  415: 'Unsupported Media Type',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

export function problem(status: number, code: string, detail: string): Problem {
  return { type: `urn:arcflow:problem:${code}`, title: TITLES[status] ?? 'Error', status, detail, code };
}

/** The longest path segment (a run id, a call id) the router reads; longer ones answer 414. */
export const MAX_PARAM_LENGTH = 200;

/**
 * The problem an error answers with: the client's and the definitions' errors keep their codes
 * and messages; Fastify's own (schema validation, body size, content type, URL) are mapped;
 * anything else is a 500 whose detail says nothing of its cause (the cause goes to the log).
 */
export function problemFor(error: unknown): Problem {
  if (error instanceof HttpProblem) return problem(error.status, error.code, error.message);
  if (error instanceof RequestError) return problem(STATUS_OF_CODE[error.code] ?? 400, error.code, error.message);
  if (error instanceof ConfigError) return problem(400, 'invalid_config', error.message);
  const fastify = error as { statusCode?: number; code?: string; validation?: unknown; message?: string };
  if (fastify.validation) return problem(400, 'invalid_request', validationMessage(fastify as { validation: unknown; message?: string; validationContext?: string }));
  if (fastify.code === 'FST_ERR_MAX_PARAM_LENGTH') return problem(414, 'uri_too_long', `a path segment is longer than ${MAX_PARAM_LENGTH} characters`);
  if (fastify.code === 'FST_ERR_BAD_URL') return problem(400, 'invalid_request', 'the URL is not valid (a malformed percent-encoding?)');
  if (fastify.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return problem(413, 'payload_too_large', 'the request body is larger than the server accepts');
  if (fastify.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') return problem(415, 'unsupported_media_type', 'send the body as application/json');
  if (fastify.code === 'FST_ERR_CTP_EMPTY_JSON_BODY' || fastify.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || fastify.statusCode === 400) {
    return problem(400, 'invalid_request', 'the request body is not valid JSON');
  }
  return problem(500, 'internal_error', 'the server failed to answer; the cause is in its log');
}

/** A schema's refusal, naming the field or parameter it did not know (the validator says only "additional properties"). */
function validationMessage(error: { validation: unknown; message?: string; validationContext?: string }): string {
  const first = (Array.isArray(error.validation) ? error.validation[0] : undefined) as
    | { keyword?: string; params?: { additionalProperty?: string }; instancePath?: string }
    | undefined;
  const unknown = first?.keyword === 'additionalProperties' ? first.params?.additionalProperty : undefined;
  if (unknown === undefined) return error.message ?? 'the request does not match its schema';
  if (error.validationContext === 'querystring') return `unknown query parameter '${unknown.slice(0, 60)}'`;
  const path = (first?.instancePath ?? '').split('/').filter(Boolean);
  return `unknown field '${[...path, unknown.slice(0, 60)].join('.')}'`;
}
