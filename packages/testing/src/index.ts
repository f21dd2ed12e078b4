export { scriptedProvider, reply, toolCall, toolCalls, failure, type ScriptedProvider, type ScriptedTurn } from './scripted-provider.ts';
export { startFakeOpenAI, type FakeOpenAIServer, type FakeTurn, type FakeRequest } from './fake-openai-server.ts';
export { assertEventInvariants } from './invariants.ts';
export { defineLoopScenarios, capturingLogger, type ScenarioRunner } from './scenarios.ts';
export { defineHostileOutputScenarios, rawTurn, rawCalls } from './hostile-scenarios.ts';
export { scriptedOverHttp } from './scripted-over-http.ts';
export { TEST_REDIS_URL, testPrefix, cleanupPrefix } from './redis.ts';
export { startPrivateRedis, type PrivateRedis } from './private-redis.ts';
export { startOtlpReceiver, type OtlpReceiver, type ReceivedSpan } from './otlp-receiver.ts';
