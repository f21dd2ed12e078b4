/** A JSON object: not null, not an array (what a config, a message or a schema node must be). */
export const isPlainObject = (value: unknown): value is Record<string, unknown> => value !== null && typeof value === 'object' && !Array.isArray(value);
