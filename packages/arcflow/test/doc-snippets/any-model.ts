import type { FakeRequest, FakeTurn } from '@arcflow/testing';

type Schema = { type?: string | string[]; properties?: Record<string, Schema>; required?: string[]; enum?: unknown[]; items?: Schema };

/**
 * A model for any snippet: it calls the first tool it is offered once, with arguments made from
 * the tool's schema, then answers with the text of the last tool result (JSON made from the
 * output schema when one is asked for).
 */
export function anyModel({ body }: FakeRequest): FakeTurn {
  const messages = body.messages as { role: string; content: unknown }[];
  const tools = (body.tools ?? []) as { function: { name: string; parameters?: Schema } }[];
  const called = messages.some((message) => message.role === 'tool');
  const first = tools[0];
  if (first && !called) return { type: 'tools', calls: [{ name: first.function.name, arguments: sampleOf(first.function.parameters ?? { type: 'object' }) }] };
  const schema = body.response_format?.json_schema?.schema as Schema | undefined;
  if (schema) return { type: 'text', content: JSON.stringify(sampleOf(schema)) };
  const result = messages.filter((message) => message.role === 'tool').at(-1);
  return { type: 'text', content: result ? `The tool said: ${String(result.content)}` : 'An answer.' };
}

/** A value that the schema accepts, for the schemas snippets use (objects, strings, numbers, enums, arrays). */
function sampleOf(schema: Schema): unknown {
  if (schema.enum) return schema.enum[0];
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  switch (type) {
    case 'object':
      return Object.fromEntries((schema.required ?? Object.keys(schema.properties ?? {})).map((key) => [key, sampleOf(schema.properties?.[key] ?? {})]));
    case 'array':
      return [];
    case 'integer':
    case 'number':
      return 2;
    case 'boolean':
      return true;
    default:
      return 'Oslo';
  }
}
