import { Agent, ConfigError, type ToolDefinition, type ToolSource, Workflow, openToolSources, tool } from '@arcflow/core';
import { arcflowToolName, mcpTools } from '@arcflow/mcp';
import { capturingLogger } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { checkMcpConfig } from '../src/config.ts';
import { selectTools } from '../src/names.ts';

const stdio = { type: 'stdio', command: 'mcp-server' } as const;
const selection = { server: 's', prefix: 's_', include: undefined, exclude: [], configured: [] };

/** A source whose tools are given: what a server listed, without a server. */
function listing(label: string, tools: readonly ToolDefinition[]): ToolSource & { closed: number } {
  return { kind: 'tool_source', label, identity: label, closed: 0, open: async () => tools };
}
const plain = (name: string, input_schema: Record<string, unknown> = { type: 'object' }) => tool({ name, description: name, input_schema, handler: () => name });

describe('arcflow names of MCP tools', () => {
  it('puts the prefix before the name and makes each character outside letters, digits, _ and - an _', () => {
    expect(arcflowToolName('everything_', 'get-sum')).toBe('everything_get-sum');
    expect(arcflowToolName('', 'files.read/v2 beta')).toBe('files_read_v2_beta');
    expect(arcflowToolName('gh_', 'créer')).toBe('gh_cr_er');
    expect(arcflowToolName('', '')).toBeUndefined();
  });

  it('cuts a name over 64 characters and ends it with a hash of the whole name, so two long names stay apart', () => {
    const long = (end: string) => `${'x'.repeat(70)}${end}`;
    const [a, b] = [arcflowToolName('p_', long('a')), arcflowToolName('p_', long('b'))];
    expect(a).toHaveLength(64);
    expect(a).toMatch(/^p_x{53}_[0-9a-f]{8}$/);
    expect(a).not.toBe(b);
  });

  it('keeps what include leaves and drops what exclude names (exclude may name tools the server no longer lists)', () => {
    const listed = ['echo', 'get-sum', 'get-env'];
    expect(selectTools(listed, selection).map((entry) => entry.name)).toEqual(['s_echo', 's_get-sum', 's_get-env']);
    expect(selectTools(listed, { ...selection, include: ['get-sum', 'echo'] })).toEqual([
      { server_name: 'echo', name: 's_echo' },
      { server_name: 'get-sum', name: 's_get-sum' },
    ]);
    expect(selectTools(listed, { ...selection, exclude: ['get-env', 'gone'] }).map((entry) => entry.server_name)).toEqual(['echo', 'get-sum']);
    expect(selectTools(listed, { ...selection, prefix: '' }).map((entry) => entry.name)).toEqual(['echo', 'get-sum', 'get-env']);
  });

  it('refuses two server tools that become one arcflow name, naming both', () => {
    expect(() => selectTools(['read.file', 'read_file'], selection)).toThrow(
      "mcpTools 's': the server's tools 'read.file' and 'read_file' both become the tool name 's_read_file' (arcflow names use letters, digits, _ and -); exclude one of them",
    );
    expect(selectTools(['read.file', 'read_file'], { ...selection, exclude: ['read.file'] })).toEqual([{ server_name: 'read_file', name: 's_read_file' }]);
  });

  it('refuses include and tools entries naming tools the server does not list, with the nearest one', () => {
    expect(() => selectTools(['echo', 'get-sum'], { ...selection, include: ['get_sum'] })).toThrow(
      "mcpTools 's': include names 'get_sum', a tool the server does not list; did you mean 'get-sum'?",
    );
    expect(() => selectTools(['echo'], { ...selection, configured: ['zzz'] })).toThrow("mcpTools 's': tools names 'zzz', a tool the server does not list (it lists: echo)");
  });
});

describe('mcpTools options', () => {
  it('refuses unknown keys with the nearest known one, at every level', () => {
    expect(() => mcpTools({ server: 's', transport: stdio, timeout: 5 } as never)).toThrow("unknown option 'timeout' in mcpTools 's'; did you mean 'timeout_ms'?");
    expect(() => mcpTools({ server: 's', transport: stdio, exlude: ['x'] } as never)).toThrow("unknown option 'exlude' in mcpTools 's'; did you mean 'exclude'?");
    expect(() => mcpTools({ server: 's', transport: { ...stdio, arg: [] } } as never)).toThrow("unknown option 'arg' in mcpTools 's': transport; did you mean 'args'?");
    expect(() => mcpTools({ server: 's', transport: { type: 'http', url: 'http://h/mcp', header: {} } } as never)).toThrow(
      "unknown option 'header' in mcpTools 's': transport; did you mean 'headers'?",
    );
    expect(() => mcpTools({ server: 's', transport: stdio, tools: { echo: { concurency: 1 } } } as never)).toThrow(
      "unknown option 'concurency' in mcpTools 's': tools['echo']; did you mean 'concurrency'?",
    );
  });

  it('checks values when the module loads, naming the server', () => {
    expect(() => mcpTools({ server: 'a b', transport: stdio })).toThrow(ConfigError);
    expect(() => mcpTools({ server: 's', transport: { type: 'ws' } } as never)).toThrow("mcpTools 's': transport.type must be 'stdio' or 'http', got \"ws\"");
    expect(() => mcpTools({ server: 's', transport: { type: 'http', url: 'ftp://h' } })).toThrow("mcpTools 's': transport.url must be an http or https URL");
    expect(() => mcpTools({ server: 's', transport: stdio, prefix: 'a.b' })).toThrow("mcpTools 's': prefix must match");
    expect(() => mcpTools({ server: 's', transport: stdio, concurrency: 0 })).toThrow("mcpTools 's': concurrency must be an integer >= 1, got 0");
    expect(() => mcpTools({ server: 's', transport: stdio, tools: { echo: { retries: -1 } } })).toThrow("mcpTools 's': tools['echo']: retries must be an integer >= 0, got -1");
    expect(() => mcpTools({ server: 's', transport: stdio, include: 'echo' } as never)).toThrow("mcpTools 's': include must be a list of strings");
    // A server name too long for the default prefix: said as such, not as a prefix the config never gave.
    expect(() => mcpTools({ server: 'a'.repeat(40), transport: stdio })).toThrow(
      `mcpTools '${'a'.repeat(40)}': the default prefix '${'a'.repeat(40)}_' is longer than 32 characters; give a shorter prefix`,
    );
    expect(() => mcpTools({ server: 'a'.repeat(40), transport: stdio, prefix: 'a_' })).not.toThrow();
  });

  it('takes every option a tool() takes, per tool over the shared ones, key by key', () => {
    const output_schema = { type: 'object', properties: { n: { type: 'number' } } };
    const checked = checkMcpConfig({
      server: 's',
      transport: stdio,
      result_timeout_ms: 1234,
      retries: 2,
      tools: { echo: { result_timeout_ms: 5000, output_schema }, other: { timeout_ms: 900 } },
    });
    expect(checked.perTool.get('echo')).toMatchObject({ result_timeout_ms: 5000, output_schema, retries: 2 });
    expect(checked.perTool.get('other')).toMatchObject({ result_timeout_ms: 1234, timeout_ms: 900, retries: 2 });
    expect(checked.defaults).toMatchObject({ result_timeout_ms: 1234, retries: 2 });
  });

  it('keeps environment and headers (secrets) out of the identity an unopened agent hashes', () => {
    const source = mcpTools({ server: 's', transport: { type: 'http', url: 'https://h.example/mcp?token=x', headers: { authorization: 'Bearer secret' } } });
    expect(JSON.stringify(source.identity)).not.toMatch(/secret|token/);
    expect(source.label).toBe("MCP server 's'");
  });
});

describe('agents with tool sources', () => {
  it('replaces each source, in place, by its tools; a tool_choice naming one of them is checked once opened', async () => {
    const source = listing("MCP server 'a'", [plain('a_one'), plain('a_two')]);
    const agent = new Agent({ name: 'src', tools: [plain('first'), source, plain('last')], model_settings: { tool_choice: { name: 'a_two' } } });
    const opened = await openToolSources([agent], { logger: capturingLogger() });
    expect((opened.definitions[0] as Agent).tools.map((item) => item.name)).toEqual(['first', 'a_one', 'a_two', 'last']);
    const wrong = new Agent({ name: 'src2', tools: [source], model_settings: { tool_choice: { name: 'a_three' } } });
    await expect(openToolSources([wrong], { logger: capturingLogger() })).rejects.toThrow("tool_choice: names 'a_three', which is not one of the agent's tools");
  });

  it("refuses a source's tool named like another tool of the agent, naming where each came from", async () => {
    const agent = new Agent({ name: 'clash', tools: [plain('s_echo'), listing("MCP server 's'", [plain('s_echo')])] });
    await expect(openToolSources([agent], { logger: capturingLogger() })).rejects.toThrow(
      "agent 'clash': tool 's_echo' from MCP server 's' has the name of a tool from tool(); give the source another prefix, or exclude one of them",
    );
  });

  it("gives a different definition hash when a server's list changed (another tool, or a schema)", async () => {
    const hashOf = async (tools: ToolDefinition[]) => {
      const opened = await openToolSources([new Agent({ name: 'fleet', tools: [listing("MCP server 's'", tools)] })], { logger: capturingLogger() });
      return (opened.definitions[0] as Agent).definition_hash;
    };
    const base = await hashOf([plain('s_echo')]);
    expect(await hashOf([plain('s_echo')])).toBe(base);
    expect(await hashOf([plain('s_echo'), plain('s_new')])).not.toBe(base);
    expect(await hashOf([plain('s_echo', { type: 'object', properties: { m: { type: 'string' } } })])).not.toBe(base);
  });

  it('opens each source once for all agents and workflows that use it, and replaces the agents inside workflows', async () => {
    let opens = 0;
    const source: ToolSource = { kind: 'tool_source', label: 'x', identity: 'x', open: async () => (opens++, [plain('x_tool')]) };
    const agent = new Agent({ name: 'wf-agent', tools: [source] });
    const flow = new Workflow({ name: 'wf', steps: [{ id: 'a', agent }] });
    const opened = await openToolSources([agent, flow], { logger: capturingLogger() });
    const [servedAgent, servedFlow] = opened.definitions as [Agent, Workflow];
    expect(opens).toBe(1);
    expect(servedFlow.agents).toEqual([servedAgent]);
    expect(servedFlow.graph.steps[0]?.tools).toEqual(['x_tool']);
    expect(servedFlow.definition_hash).not.toBe(flow.definition_hash);
  });

  it('closes what other sources opened when one fails', async () => {
    const closed: string[] = [];
    const opening: ToolSource = {
      kind: 'tool_source',
      label: 'ok',
      identity: 'ok',
      open: async (session) => {
        session.resource('conn', () => ({ close: async () => void closed.push('conn') }));
        return [plain('ok_tool')];
      },
    };
    const failing: ToolSource = { kind: 'tool_source', label: 'bad', identity: 'bad', open: async () => Promise.reject(new ConfigError("MCP server 'bad' cannot be reached")) };
    await expect(openToolSources([new Agent({ name: 'two', tools: [opening, failing] })], { logger: capturingLogger() })).rejects.toThrow("MCP server 'bad' cannot be reached");
    expect(closed).toEqual(['conn']);
  });
});
