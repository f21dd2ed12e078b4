export { scriptedProvider, reply, toolCall, toolCalls, failure, type ScriptedProvider, type ScriptedTurn } from './scripted-provider.ts';
export { startFakeOpenAI, type FakeOpenAIServer, type FakeTurn, type FakeRequest } from './fake-openai-server.ts';
export { assertEventInvariants } from './invariants.ts';
