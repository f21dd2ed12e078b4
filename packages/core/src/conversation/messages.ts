import { byteSize } from '../canonical.ts';
import { INPUT_MESSAGE_LIMITS, MAX_INPUT_BYTES } from '../defaults.ts';
import { clipped, nearestKey } from '../definitions/known-keys.ts';
import { RequestError } from '../errors.ts';
import type { ChatMessage } from '../vocabulary/messages.ts';
import { isPlainObject } from '../plain-object.ts';

/**
 * A run's input (SPEC §11): a string, which is one user message, or a list of messages in the
 * chat-completions shape, given to the provider as they are after the agent's instructions.
 */
export type RunInput = string | readonly ChatMessage[];

/** The messages an input stands for: a string is one user message. */
export function inputMessages(input: RunInput): readonly ChatMessage[] {
  return typeof input === 'string' ? [{ role: 'user', content: input }] : input;
}

/**
 * Checks a run's input before anything is queued: a string, or a non-empty list of messages whose
 * roles, fields, parts and sizes are right, and whose tool messages answer the calls of the
 * assistant message before them. A refusal is a {@link RequestError} naming the message's index
 * and field (`input[2].role: …`): `invalid_input`, or `input_too_large` for a size over `maxBytes`
 * (an enqueue's limit unless given).
 */
export function checkRunInput(input: unknown, maxBytes = MAX_INPUT_BYTES): RunInput {
  if (typeof input === 'string') {
    const size = byteSize(input);
    if (size > maxBytes) throw new RequestError('input_too_large', `input is ${size} bytes; the limit is ${maxBytes}`);
    return input;
  }
  if (!Array.isArray(input)) refuse('input', 'expected a string or a list of messages');
  if (input.length === 0) refuse('input', 'expected at least one message');
  const calls = new OpenCalls();
  input.forEach((message, index) => {
    const at = `input[${index}]`;
    const checked = checkMessage(message, at);
    calls.see(checked, at);
  });
  calls.end();
  // Shapes first: a checked list is plain JSON, so it has a size.
  if (maxBytes === Number.POSITIVE_INFINITY) return input as readonly ChatMessage[];
  const size = byteSize(JSON.stringify(input));
  if (size > maxBytes) throw new RequestError('input_too_large', `input is ${size} bytes as JSON; the limit is ${maxBytes}`);
  return input as readonly ChatMessage[];
}

/**
 * A workflow run's input: text only, since its steps' inputs are built from text (the run's input
 * and the other steps' outputs); a list of messages is refused naming the workflow.
 */
export function checkWorkflowInput(input: RunInput, workflow: string): string {
  if (typeof input !== 'string') refuse('input', `workflow '${workflow}' takes a string; a list of messages is for an agent run`);
  return input;
}

type Role = ChatMessage['role'];

/** The fields each role's message may have. */
const FIELDS: Readonly<Record<Role, readonly string[]>> = {
  system: ['role', 'content', 'name'],
  developer: ['role', 'content', 'name'],
  user: ['role', 'content', 'name'],
  // `refusal` as the OpenAI SDK returns an assistant message: `null`, or the model's refusal text.
  assistant: ['role', 'content', 'name', 'tool_calls', 'refusal'],
  tool: ['role', 'content', 'tool_call_id'],
};

const ROLES = Object.keys(FIELDS) as Role[];

/** How each role's content is described in a refusal: images go in user messages only. */
const CONTENT_EXPECTED: Readonly<Record<Role, string>> = {
  system: 'expected a string or a list of text parts',
  developer: 'expected a string or a list of text parts',
  user: 'expected a string or a list of text and image_url parts',
  assistant: 'expected a string, a list of text parts, or null with tool_calls or a refusal',
  tool: 'expected a string or a list of text parts',
};

const IMAGE_DETAILS: readonly unknown[] = ['auto', 'low', 'high'];

function refuse(at: string, problem: string, code = 'invalid_input'): never {
  throw new RequestError(code, `${at}: ${problem}`);
}

/** Refuses the first field of `value` not in `allowed`, suggesting the nearest allowed one. */
function onlyFields(value: Record<string, unknown>, allowed: readonly string[], at: string, what: string): void {
  for (const key of Object.keys(value)) {
    if (allowed.includes(key)) continue;
    const nearest = nearestKey(key, allowed);
    refuse(`${at}.${clipped(key)}`, `not a field of ${what}${nearest ? `; did you mean '${nearest}'?` : ` (allowed: ${allowed.join(', ')})`}`);
  }
}

function nonEmptyString(value: unknown, at: string, problem = 'expected a non-empty string'): string {
  if (typeof value !== 'string' || value === '') refuse(at, problem);
  return value;
}

function checkMessage(message: unknown, at: string): ChatMessage {
  if (!isPlainObject(message)) refuse(at, 'expected a message { role, content }');
  const role = message.role as Role;
  if (!ROLES.includes(role)) {
    refuse(`${at}.role`, `expected 'user', 'assistant', 'system', 'developer' or 'tool'${typeof role === 'string' ? `, got '${role.slice(0, 40)}'` : ''}`);
  }
  onlyFields(message, FIELDS[role], at, `${role === 'assistant' ? 'an' : 'a'} ${role} message`);
  if (message.name !== undefined) nonEmptyString(message.name, `${at}.name`);
  if (role === 'tool') nonEmptyString(message.tool_call_id, `${at}.tool_call_id`, 'required on a tool message (a non-empty string)');
  if (message.refusal !== undefined && message.refusal !== null && typeof message.refusal !== 'string') refuse(`${at}.refusal`, 'expected a string or null');
  if (role === 'assistant' && message.tool_calls !== undefined) checkToolCalls(message.tool_calls, `${at}.tool_calls`);
  const content = message.content;
  if (role === 'assistant' && (content === null || content === undefined)) {
    if (!Array.isArray(message.tool_calls) && typeof message.refusal !== 'string') refuse(`${at}.content`, 'required on an assistant message without tool_calls or a refusal');
  } else if (typeof content !== 'string') {
    if (!Array.isArray(content)) refuse(`${at}.content`, CONTENT_EXPECTED[role]);
    if (content.length === 0) refuse(`${at}.content`, 'expected at least one part');
    for (const [index, part] of content.entries()) checkPart(part, `${at}.content[${index}]`, role);
  }
  return message as unknown as ChatMessage;
}

function checkPart(part: unknown, at: string, role: Role): void {
  if (!isPlainObject(part))
    refuse(at, role === 'user' ? "expected a part { type: 'text', text } or { type: 'image_url', image_url: { url } }" : "expected a part { type: 'text', text }");
  if (part.type === 'text') {
    onlyFields(part, ['type', 'text'], at, 'a text part');
    if (typeof part.text !== 'string') refuse(`${at}.text`, 'expected a string');
    return;
  }
  if (part.type !== 'image_url') refuse(`${at}.type`, role === 'user' ? "expected 'text' or 'image_url'" : "expected 'text'");
  if (role !== 'user') refuse(`${at}.type`, `image_url parts go in user messages, not ${role} messages`);
  onlyFields(part, ['type', 'image_url'], at, 'an image_url part');
  const image = part.image_url;
  if (!isPlainObject(image)) refuse(`${at}.image_url`, 'expected { url }');
  onlyFields(image, ['url', 'detail'], `${at}.image_url`, 'an image_url');
  if (image.detail !== undefined && !IMAGE_DETAILS.includes(image.detail)) refuse(`${at}.image_url.detail`, "expected 'auto', 'low' or 'high'");
  checkImageUrl(image.url, `${at}.image_url.url`);
}

/** An image's URL: `data:` (the image itself) or `http(s):` (fetched by the provider), each within its size. */
function checkImageUrl(url: unknown, at: string): void {
  if (typeof url !== 'string') refuse(at, 'expected a string');
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1]?.toLowerCase();
  if (scheme !== 'data' && scheme !== 'https' && scheme !== 'http') refuse(at, 'expected an https:, http: or data: URL');
  const limit = scheme === 'data' ? INPUT_MESSAGE_LIMITS.max_data_url_bytes : INPUT_MESSAGE_LIMITS.max_url_bytes;
  const size = byteSize(url);
  if (size > limit) refuse(at, `${size} bytes; the limit is ${limit}${scheme === 'data' ? ' for a data: URL' : ''}`, 'input_too_large');
}

function checkToolCalls(calls: unknown, at: string): void {
  if (!Array.isArray(calls) || calls.length === 0) refuse(at, 'expected a non-empty list of calls (leave it out when there are none)');
  const ids = new Set<string>();
  calls.forEach((call, index) => {
    const where = `${at}[${index}]`;
    if (!isPlainObject(call)) refuse(where, "expected a call { id, type: 'function', function: { name, arguments } }");
    onlyFields(call, ['id', 'type', 'function'], where, 'a tool call');
    const id = nonEmptyString(call.id, `${where}.id`);
    if (ids.has(id)) refuse(`${where}.id`, `repeats the id '${clipped(id)}' of an earlier call`);
    ids.add(id);
    if (call.type !== 'function') refuse(`${where}.type`, "expected 'function'");
    const fn = call.function;
    if (!isPlainObject(fn)) refuse(`${where}.function`, 'expected { name, arguments }');
    onlyFields(fn, ['name', 'arguments'], `${where}.function`, 'a function call');
    nonEmptyString(fn.name, `${where}.function.name`);
    if (typeof fn.arguments !== 'string') refuse(`${where}.function.arguments`, 'expected a string (the arguments as JSON text)');
  });
}

/**
 * The calls of the last assistant message still waiting for their tool messages. Chat-completions
 * providers refuse a conversation where a tool message answers no such call, or where a call is
 * left unanswered, so both are refused here rather than by the provider after the run started.
 */
class OpenCalls {
  private open = new Map<string, string>();

  see(message: ChatMessage, at: string): void {
    if (message.role === 'tool') {
      if (!this.open.delete(message.tool_call_id)) refuse(`${at}.tool_call_id`, `'${message.tool_call_id.slice(0, 64)}' answers no open call of the assistant message before it`);
      return;
    }
    this.end();
    if (message.role !== 'assistant') return;
    for (const [index, call] of (message.tool_calls ?? []).entries()) this.open.set(call.id, `${at}.tool_calls[${index}]`);
  }

  /** Refuses a call that no tool message answered before the next message (or the end of the input). */
  end(): void {
    for (const [id, at] of this.open) refuse(at, `no tool message answers call '${id.slice(0, 64)}'`);
  }
}
