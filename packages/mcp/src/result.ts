import type { CallResult } from './connection.ts';

/**
 * What the model receives of a `tools/call` result: its text parts as they are and every other
 * part (image, audio, resource, link) as its JSON, one part a line, in the server's order; with
 * no content, the structured content (or an old server's `toolResult`) as JSON. Untrusted like any
 * tool result: the engine cuts it to the tool's `max_result_bytes`.
 */
export function resultText(result: CallResult): string {
  const content = result.content;
  if (Array.isArray(content) && content.length > 0) {
    return content.map((part) => (isTextPart(part) ? part.text : (JSON.stringify(part) ?? ''))).join('\n');
  }
  if (result.structuredContent !== undefined) return JSON.stringify(result.structuredContent) ?? '';
  if (result.toolResult !== undefined) return JSON.stringify(result.toolResult) ?? '';
  return '';
}

function isTextPart(part: unknown): part is { type: 'text'; text: string } {
  return part !== null && typeof part === 'object' && (part as { type?: unknown }).type === 'text' && typeof (part as { text?: unknown }).text === 'string';
}
