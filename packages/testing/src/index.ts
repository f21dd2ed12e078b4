/**
 * Test helpers for arcflow users and for its own tests: a scripted model, a fake
 * OpenAI-compatible server, the event log's invariants, Redis helpers. Nothing here loads a test
 * runner; the shared scenario suites are in `./scenarios-entry.ts` (`@arcflow/testing/scenarios`).
 */
export { scriptedProvider, reply, toolCall, toolCalls, failure, type ScriptedProvider, type ScriptedTurn } from './scripted-provider.ts';
export { childrenInTestMode } from './test-mode-children.ts';
export { rawTurn, rawCalls } from './raw-turns.ts';
export {
  startFakeOpenAI,
  type FakeOpenAIServer,
  type FakeOpenAIOptions,
  type FakeTurn,
  type FakeRequest,
  type FakeStreamFault,
  type FakeStreamPacing,
} from './fake-openai-server.ts';
export { assertEventInvariants, assertWorkflowInvariants } from './invariants.ts';
export { capturingLogger } from './capturing-logger.ts';
export { scriptedOverHttp } from './scripted-over-http.ts';
export { TEST_REDIS_URL, testPrefix, cleanupPrefix } from './redis.ts';
export { redisConnectionsOf } from './redis-connections.ts';
export { startPrivateRedis, freePort, type PrivateRedis } from './private-redis.ts';
export { startPrivateCluster, testCluster, type PrivateCluster } from './private-cluster.ts';
export { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from './otlp-receiver.ts';
export { parsePrometheusText, sampleSum, metricFamilies, type PrometheusSample } from './prometheus-text.ts';
export { receivedPoints, latestPoints, type ReceivedPoint } from './otlp-metrics.ts';
