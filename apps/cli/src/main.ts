import { createRequire } from 'node:module';
import { parseArgs } from 'node:util';

// A process loads what it uses: each command's module (and with it Redis, the HTTP server, the
// engine or the demo) is imported when that command runs, so `--version` loads none of them.
const runs = () => import('./commands/runs.ts');

const USAGE = `usage: arcflow <command> [options]

  worker --module <file.ts|file.js> [--roles provider,tools] [--tools a,b] [--concurrency N] [--metrics-port N]
                       --metrics-port: serve Prometheus metrics at GET /metrics on port N
  enqueue <agent> (<input> | --input-json JSON) [--config JSON] [--exec-config JSON] [--state JSON]
          [--idempotency-key K] [--thread ID [--on-busy queue|steer|reject]] [--tenant T] [--priority P] [--stream] [--wait [--timeout-ms N]] [--json]
                       --input-json: the input as a JSON list of chat messages ({ role, content })
                       --state: the run's initial state, a JSON object (default {}, or on a thread
                         the state its last completed run left)
                       --thread: run on the thread's conversation so far; append the run's messages to it
                       --tenant: the tenant the run is for (jobs are shared fairly across tenants; default: default)
                       --priority: 1 (first) to 10 within its tenant (default 5)
                       --stream: stream the model's text as it is written (read it with \`arcflow stream\`)
                       --wait: wait for the run to end and print it; --timeout-ms: how long at most (default 600000)
  get <run_id> [--json]   the run record, with its state
  thread <thread_id> [--json]   a thread's messages and runs
  events <run_id> [--follow] [--json]
  stream <run_id> [--after N] [--json]   the run's text as the model writes it, until the run ends
  inspect <run_id> [--messages [--json]]   the run as a tree; --messages: its conversation (what its tools received and returned)
  cancel <run_id>
  approve <run_id> <tool_call_id> [--reject] [--reason TEXT] [--by NAME] [--json]
  tool-result <run_id> <tool_call_id> (--output JSON | --error TEXT) [--json]
                       answer a call waiting for its result from outside (a browser tool, a deferred handler):
                         --output completes it with a JSON value, --error fails it with the text
  runs [--status S] [--agent A] [--tenant T] [--limit N] [--cursor C] [--json]
  runs retry|cancel --status S [--agent A] [--tenant T] [--since ISO] [--dry-run] [--json]
                       retries (a fork from the failed iteration) or cancels every matching run; safe to repeat:
                       a run is retried once, an ended run is not cancelled; --dry-run: say what it would do
  fork <run_id> (--from-iteration K | --step S [--from-iteration K]) [--config JSON] [--exec-config JSON] [--json]
                       a new run that replays the run's recorded rounds before iteration K (no model call,
                       no tool execution) and runs live from K; --step: a workflow's step to re-run
  serve [--port 8080] [--host 127.0.0.1]   the HTTP API (/v1, /openapi.json), the web console (/) and /metrics
  token (--thread ID | --run ID) --actions read,send,cancel,respond [--agents A,B] [--subject S] [--tenant T] [--expires-in S]
                       prints an end user's token for one thread or run, signed with ARCFLOW_TOKEN_SECRET;
                       --agents: the agents send may enqueue; --subject: the app's user id (runs say enqueued_by: token:S);
                       --expires-in: seconds, 1 to 86400 (default 3600)
  demo [--runs N]       two workers, N runs of the example agent (default 12) and up to N of its workflow
  help                 this text
  --version            the version

environment: REDIS_URL, ARCFLOW_PREFIX, OPENAI_API_KEY, OPENAI_BASE_URL, ARCFLOW_MODEL, ARCFLOW_WATCHDOG_MS;
  worker: ARCFLOW_PARTITIONS, ARCFLOW_SERVE_PARTITIONS, ARCFLOW_METRICS_PORT, ARCFLOW_MAX_STALLED_COUNT, ARCFLOW_HEAP_GROWING_PERCENT;
  metrics and traces: OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, OTEL_METRIC_EXPORT_INTERVAL, OTEL_SERVICE_NAME;
  serve: ARCFLOW_API_KEYS (name:secret:scope,…), ARCFLOW_API_RATE, ARCFLOW_CORS_ORIGINS, ARCFLOW_TRACE_URL;
  serve and token: ARCFLOW_TOKEN_SECRET (at least 32 bytes; two separated by a comma rotate: the first signs)`;

/** This package's version (the same for every arcflow package). */
const VERSION = (createRequire(import.meta.url)('../package.json') as { version: string }).version;

class UsageError extends Error {}

const OPTIONS = {
  module: { type: 'string' },
  roles: { type: 'string' },
  tools: { type: 'string' },
  concurrency: { type: 'string' },
  'metrics-port': { type: 'string' },
  config: { type: 'string' },
  'input-json': { type: 'string' },
  'exec-config': { type: 'string' },
  state: { type: 'string' },
  'idempotency-key': { type: 'string' },
  thread: { type: 'string' },
  'on-busy': { type: 'string' },
  'timeout-ms': { type: 'string' },
  runs: { type: 'string' },
  port: { type: 'string' },
  host: { type: 'string' },
  status: { type: 'string' },
  agent: { type: 'string' },
  limit: { type: 'string' },
  cursor: { type: 'string' },
  wait: { type: 'boolean' },
  stream: { type: 'boolean' },
  reject: { type: 'boolean' },
  reason: { type: 'string' },
  by: { type: 'string' },
  output: { type: 'string' },
  error: { type: 'string' },
  json: { type: 'boolean' },
  follow: { type: 'boolean' },
  messages: { type: 'boolean' },
  after: { type: 'string' },
  run: { type: 'string' },
  actions: { type: 'string' },
  agents: { type: 'string' },
  subject: { type: 'string' },
  tenant: { type: 'string' },
  priority: { type: 'string' },
  'expires-in': { type: 'string' },
  'from-iteration': { type: 'string' },
  step: { type: 'string' },
  since: { type: 'string' },
  'dry-run': { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean', short: 'v' },
} as const;

/** The options each command takes (`runs retry` and `runs cancel` as `runs-bulk`); any other is refused, not ignored. */
const COMMAND_OPTIONS: Readonly<Record<string, readonly (keyof typeof OPTIONS)[]>> = {
  worker: ['module', 'roles', 'tools', 'concurrency', 'metrics-port'],
  enqueue: ['config', 'input-json', 'exec-config', 'state', 'idempotency-key', 'thread', 'on-busy', 'tenant', 'priority', 'stream', 'wait', 'timeout-ms', 'json'],
  get: ['json'],
  thread: ['json'],
  events: ['follow', 'json'],
  stream: ['after', 'json'],
  inspect: ['messages', 'json'],
  cancel: [],
  approve: ['reject', 'reason', 'by', 'json'],
  'tool-result': ['output', 'error', 'json'],
  runs: ['status', 'agent', 'tenant', 'limit', 'cursor', 'json'],
  'runs-bulk': ['status', 'agent', 'tenant', 'since', 'dry-run', 'json'],
  fork: ['from-iteration', 'step', 'config', 'exec-config', 'json'],
  serve: ['port', 'host'],
  token: ['thread', 'run', 'actions', 'agents', 'subject', 'tenant', 'expires-in'],
  demo: ['runs'],
};

/** Refuses an option the command does not take: `runs cancel --limit 1` would otherwise cancel every match. */
function checkCommandOptions(command: string, sub: string | undefined, given: Record<string, unknown>): void {
  const name = command === 'runs' && (sub === 'retry' || sub === 'cancel') ? 'runs-bulk' : command;
  const allowed = COMMAND_OPTIONS[name];
  if (!allowed) return;
  const other = Object.keys(given).find((option) => option !== 'help' && option !== 'version' && !(allowed as readonly string[]).includes(option));
  if (other === undefined) return;
  const shown = name === 'runs-bulk' ? `runs ${sub}` : command;
  throw new UsageError(`${shown} does not take --${other}${allowed.length > 0 ? ` (it takes ${allowed.map((option) => `--${option}`).join(', ')})` : ' (it takes no option)'}`);
}

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  const [command, ...args] = positionals;
  if (command !== undefined) checkCommandOptions(command, args[0], values);
  onClosedStdout(command === 'worker' || command === 'serve' ? 'keep-serving' : 'exit');
  const need = (count: number, names: string) => {
    if (args.length !== count) throw new UsageError(`${command} takes ${names}`);
  };
  if (values.version) {
    console.log(VERSION);
    return 0;
  }
  if (values.help || command === 'help' || !command) {
    console.log(USAGE);
    return command || values.help ? 0 : 2;
  }
  switch (command) {
    case 'worker':
      need(0, '--module <file>');
      return (await import('./commands/worker.ts')).workerCommand(values);
    case 'enqueue':
      // The input is the second argument, or a list of messages in --input-json (SPEC §11), never both.
      if (values['input-json'] === undefined) need(2, '<agent> <input>, or <agent> --input-json JSON');
      else need(1, '<agent> and --input-json JSON, with no <input>');
      return (await runs()).enqueueCommand(args[0]!, args[1], values);
    case 'get':
      need(1, '<run_id>');
      return (await runs()).getCommand(args[0]!, values);
    case 'thread':
      need(1, '<thread_id>');
      return (await runs()).threadCommand(args[0]!, values);
    case 'events':
      need(1, '<run_id>');
      return (await runs()).eventsCommand(args[0]!, values);
    case 'stream':
      need(1, '<run_id>');
      return (await import('./commands/stream.ts')).streamCommand(args[0]!, { after: values.after, json: values.json });
    case 'inspect':
      need(1, '<run_id>');
      return (await runs()).inspectCommand(args[0]!, { messages: values.messages, json: values.json });
    case 'cancel':
      need(1, '<run_id>');
      return (await runs()).cancelCommand(args[0]!);
    case 'approve':
      need(2, '<run_id> <tool_call_id>');
      return (await runs()).approveCommand(args[0]!, args[1]!, { reject: values.reject, reason: values.reason, by: values.by, json: values.json });
    case 'tool-result': {
      need(2, '<run_id> <tool_call_id> and --output JSON or --error TEXT');
      if ((values.output === undefined) === (values.error === undefined)) throw new UsageError('tool-result takes exactly one of --output JSON and --error TEXT');
      return (await import('./commands/tool-result.ts')).toolResultCommand(args[0]!, args[1]!, { output: values.output, error: values.error, json: values.json });
    }
    case 'runs':
      if (args[0] === 'retry' || args[0] === 'cancel') {
        need(1, 'retry or cancel, and options');
        return (await import('./commands/operate.ts')).bulkCommand(args[0], values);
      }
      need(0, 'only options (or retry|cancel --status S)');
      return (await runs()).runsCommand(values);
    case 'fork':
      need(1, '<run_id> --from-iteration K');
      return (await import('./commands/operate.ts')).forkCommand(args[0]!, values);
    case 'serve':
      need(0, 'no arguments');
      return (await import('./commands/serve.ts')).serveCommand({ port: values.port, host: values.host });
    case 'token':
      need(0, 'only options');
      return (await import('./commands/token.ts')).tokenCommand(values);
    case 'demo':
      need(0, 'no arguments');
      return (await import('./commands/demo.ts')).demoCommand({ runs: values.runs });
    default:
      throw new UsageError(`unknown command '${command}'`);
  }
}

/** A usage error's message; an unknown flag names the nearest known one (`--threadid` → `--thread`). */
async function usageMessage(error: Error): Promise<string> {
  const flag = /^Unknown option '(-{1,2})([^']+)'/.exec(error.message);
  if ((error as { code?: string }).code !== 'ERR_PARSE_ARGS_UNKNOWN_OPTION' || !flag) return error.message;
  const { nearestKey } = await import('@arcflow/core');
  const nearest = nearestKey(flag[2]!.replaceAll('_', '-'), Object.keys(OPTIONS));
  return `unknown option '${flag[1]}${flag[2]}'${nearest ? `; did you mean '--${nearest}'?` : ''}`;
}

/** A refusal of arcflow's own (a bad config or request): its message is the whole story. */
const isOwnError = (error: unknown): error is Error => error instanceof Error && (error.name === 'ConfigError' || error.name === 'RequestError');

/**
 * Output piped into a reader that stops early (`arcflow events … | head`): a command stops
 * quietly, as Unix tools do; a worker keeps serving (its stdout carries only the ready line).
 */
function onClosedStdout(then: 'exit' | 'keep-serving'): void {
  process.stdout.on('error', (error: NodeJS.ErrnoException) => {
    if (error.code !== 'EPIPE') throw error;
    if (then === 'exit') process.exit(0);
  });
}

main(process.argv.slice(2)).then(
  (code) => {
    // Workers keep running until a signal; everything else exits with its code.
    if (code >= 0) process.exit(code);
  },
  async (error: unknown) => {
    if (error instanceof UsageError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      console.error(`arcflow: ${await usageMessage(error as Error)}\n\n${USAGE}`);
      process.exit(2);
    }
    // By name, not instanceof: the error classes live in @arcflow/core, which this module does not load up front.
    if (isOwnError(error)) {
      console.error(`arcflow: ${error.message}`);
      process.exit(1);
    }
    console.error(`arcflow: ${(error as Error)?.stack ?? String(error)}`);
    process.exit(1);
  },
);
