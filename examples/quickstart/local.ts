// local.ts
import { runLocal, openaiProvider } from 'arcflow';
import { researcher } from './agents.ts';

const run = await runLocal(researcher, 'Weather in Oslo?', { provider: openaiProvider() });
console.log(run.output, run.events.length);
