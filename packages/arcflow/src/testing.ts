/**
 * `arcflow/testing`: helpers for testing agents without a real model or a shared Redis. It loads
 * no test runner, and the runtime (`arcflow`) never imports it.
 */
export {
  scriptedProvider,
  reply,
  toolCall,
  toolCalls,
  failure,
  startFakeOpenAI,
  assertEventInvariants,
  capturingLogger,
  startPrivateRedis,
  type ScriptedProvider,
  type ScriptedTurn,
  type FakeOpenAIServer,
  type FakeTurn,
  type FakeRequest,
  type PrivateRedis,
} from '@arcflow/testing';
