// workflow.ts
import { Agent, Workflow, tool } from 'arcflow';
import { researcher } from './agents.ts';

const convert = tool({
  name: 'convert_currency',
  description: 'Converts EUR',
  input_schema: { type: 'object', properties: { amount: { type: 'number' }, to: { type: 'string' } }, required: ['amount', 'to'] },
  handler: async ({ amount, to }) => `${amount} EUR = ${(amount * 11.6).toFixed(2)} ${to}`,
});

export const briefing = new Workflow({
  name: 'trip_briefing',
  steps: [
    { id: 'weather', agent: researcher }, // a root: gets the run input
    { id: 'fx', tool: convert, args: () => ({ amount: 100, to: 'NOK' }) }, // a tool step, in parallel
    { id: 'report', agent: new Agent({ name: 'writer' }), depends_on: ['weather', 'fx'] },
    // report's input: the run input, then "[weather]" and "[fx]", each with that step's output
  ],
  on_step_failure: 'continue', // or 'fail_fast'
});
