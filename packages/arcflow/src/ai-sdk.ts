/**
 * `arcflow/ai-sdk`: arcflow for AI SDK 7's `useChat` (SPEC §12). The adapter of another
 * ecosystem, at the edge: `ai` is its peer dependency, and nothing in arcflow's engine imports it.
 */
export { ArcflowChatTransport, type ArcflowChatTransportOptions, type TransportHeaders, type TransportToken } from './ai-sdk/transport.ts';
