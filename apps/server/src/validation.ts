import AjvCompiler from '@fastify/ajv-compiler';

/**
 * Fastify's request validators, but for one rule: a JSON body is checked as it was sent. Query
 * strings, path parameters and headers are text by nature, so they are coerced to their schema's
 * types (`?after=2` is the number 2); a body is typed JSON, so a number sent where text is due
 * (`"error": 5`), or text where a number is (`"priority": "3"`), is refused, as the client refuses it.
 *
 * With a validator factory of its own, Fastify no longer lowercases the keys of a route's header
 * schema: write header names there in lowercase (`last-event-id`), as Node gives them.
 */
export function bodiesAsSent(): AjvCompiler.ValidatorFactory {
  const fromPool = AjvCompiler();
  return (externalSchemas, options) => {
    const coercing = fromPool(externalSchemas, options);
    // The server's options are plain ajv's (not JTD's), so coerceTypes is one of theirs.
    const asSent = fromPool(externalSchemas, { ...options, mode: undefined, customOptions: { ...(options?.customOptions as AjvCompiler.Options), coerceTypes: false } });
    return (route) => (route.httpPart === 'body' ? asSent : coercing)(route);
  };
}
