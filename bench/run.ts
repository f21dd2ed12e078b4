// `npm run bench`: arcflow against baselines measured in this same run, as one table.
import { heapAfterGc, memoryProfile, parallelNapLatency, recoveryAfterKill, recoverySeconds } from './durability.ts';
import { cleanupPrefix } from '@arcflow/testing';
import { type CpuSplit, REDIS_URL, type Row, commandsText, cpuText, cpuTotal, ms, percentile, printTable } from './lib.ts';
import { engineIteration, localIteration, p50, rawFlowIteration } from './overhead.ts';
import { FAN, TRIALS as THROUGHPUT_TRIALS, toolJobsPerSecond } from './throughput.ts';
import { tracingWorkerCpu, withTracing } from './tracing.ts';
import { Redis } from 'ioredis';
import { LAYERS, rawLayeredFlowTimes, workflowRunTimes } from './workflow.ts';
import { enqueueOverHttp, followerCost } from './http.ts';
import { overviewCost } from './overview.ts';
import { tokenCheckCost } from './tokens.ts';
import { clusterThroughput, idleWorkerCost } from './cluster.ts';
import { type ScriptCost, scriptCosts } from './script-costs.ts';
import { startupRows } from './startup.ts';
import { type MetricsCpu, collectionCost, workerCpuWithMetrics } from './metrics.ts';
import { recordingCost } from './recording.ts';
import { modelSettingsRow, wireRow } from './model-settings.ts';
import { type ThreadWindow, type TranscriptWindow, stateAgents, threadRuns, transcriptRun } from './transcript.ts';
import { childRunRows } from './children.ts';
import { firstTextRow, throughputRows as streamingThroughputRows, writesRow } from './streaming.ts';
import { streamCostRows } from './stream-costs.ts';
import { finishedRunMemory } from './finished-runs.ts';
import { viewersRows } from './viewers.ts';
import { waitingWatchdogRow } from './waiting.ts';
import { fairCallCost, fairJobCost, floodWaits, priorityMoveCost } from './tenants.ts';
import { reservationCost } from './cost.ts';

const only = new Set(process.argv.slice(2));
const wanted = (section: string) => only.size === 0 || only.has(section);
const prefixes: string[] = [];
const prefix = (name: string) => {
  const value = `bench-${name}-${process.pid}`;
  prefixes.push(value);
  return value;
};
const rows: Row[] = [];
const verdict = (ok: boolean) => (ok ? 'yes' : 'NO');
const signedMs = (value: number) => `${value >= 0 ? '+' : '-'}${Math.abs(value).toFixed(0)} ms`;
const progress = (message: string) => process.stderr.write(`bench: ${message}\n`);
/** Redis CPU per tool call of a throughput arm (its split is per run of FAN calls, in ms). */
const redisPerCall = (split: CpuSplit) => `${((split.redis * 1000) / FAN).toFixed(0)} µs`;
/** A memory row: MiB after 1k and 10k runs and the growth between them, checked against `limit` % if given. */
const growthRow = (measure: string, at1k: number, at10k: number, limit?: number): Row => {
  const growth = (at10k / at1k - 1) * 100;
  return {
    measure,
    arcflow: `${at10k.toFixed(1)} MiB`,
    baseline: `${at1k.toFixed(1)} MiB`,
    ratio: `${growth >= 0 ? '+' : ''}${growth.toFixed(1)}%`,
    target: limit === undefined ? 'info' : `< ${limit}% growth`,
    verdict: limit === undefined ? '-' : verdict(growth < limit),
  };
};
/** A late-against-early row of a flat-cost target (SPEC §11): within `limit` times the early value, or information only. */
const flatRow = (measure: string, late: number, early: number, format: (value: number) => string, limit?: number): Row => ({
  measure,
  arcflow: format(late),
  baseline: format(early),
  ratio: `${(late / early).toFixed(2)}x`,
  target: limit === undefined ? 'info' : `<= ${limit}x`,
  verdict: limit === undefined ? '-' : verdict(late <= limit * early),
});
const kib = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`;
/** The heap cap docs/architecture.md recommends for workers ("Worker memory"). */
const CAPPED_HEAP_MIB = 1024;

try {
  if (wanted('tenants')) {
    progress('fair scheduling across tenants');
    const cost = await fairJobCost(prefix('tenant-cost'));
    rows.push({
      measure: 'Redis CPU per job (add, take, complete), fair vs single queue',
      arcflow: `${cost.fair.toFixed(0)} µs (${cost.commands.fair.toFixed(0)} cmds)`,
      baseline: `${cost.plain.toFixed(0)} µs (${cost.commands.plain.toFixed(0)} cmds)`,
      ratio: `${(cost.fair / cost.plain).toFixed(2)}x`,
      target: 'info (a tool call costs more than its job: see the per-call row)',
      verdict: '-',
    });
    rows.push({
      measure: "  of which BullMQ's prioritized path (one fixed priority) vs single queue",
      arcflow: `${cost.fixed.toFixed(0)} µs (${cost.commands.fixed.toFixed(0)} cmds)`,
      baseline: `${cost.plain.toFixed(0)} µs (${cost.commands.plain.toFixed(0)} cmds)`,
      ratio: `${(cost.fixed / cost.plain).toFixed(2)}x`,
      target: 'info',
      verdict: '-',
    });
    const calls = await fairCallCost({ fair: prefix('tenant-call-fair'), single: prefix('tenant-call-single') });
    rows.push({
      measure: 'Redis CPU per tool call, one tenant busy, fair vs single queue (whole engine)',
      arcflow: `${calls.fair.redisPerCall.toFixed(0)} µs`,
      baseline: `${calls.single.redisPerCall.toFixed(0)} µs`,
      ratio: `${(calls.fair.redisPerCall / calls.single.redisPerCall).toFixed(2)}x`,
      target: '<= 1.1x',
      verdict: verdict(calls.fair.redisPerCall <= 1.1 * calls.single.redisPerCall),
    });
    rows.push({
      measure: "  all CPU per tool call (Redis's, the worker's, the client's)",
      arcflow: `${calls.fair.cpuPerCall.toFixed(0)} µs`,
      baseline: `${calls.single.cpuPerCall.toFixed(0)} µs`,
      ratio: `${(calls.fair.cpuPerCall / calls.single.cpuPerCall).toFixed(2)}x`,
      target: 'info',
      verdict: '-',
    });
    rows.push({
      measure: 'tool calls per second, one tenant busy, fair vs single queue (paired)',
      arcflow: `${calls.fair.rate.toFixed(0)}/s`,
      baseline: `${calls.single.rate.toFixed(0)}/s`,
      ratio: `${calls.rateRatio.toFixed(2)}x`,
      target: 'info (the issue asks: equal)',
      verdict: '-',
    });
    const waits = await floodWaits(prefix('tenant-flood'));
    rows.push({
      measure: "light tenants' wait p99 under a 10,000-run flood",
      arcflow: `${ms(waits.fair.p99)} (p50 ${ms(waits.fair.p50)})`,
      baseline: `${ms(waits.plain.p99)} (p50 ${ms(waits.plain.p50)})`,
      ratio: `${(waits.fair.p99 / waits.plain.p99).toFixed(3)}x`,
      target: '<< single queue',
      verdict: verdict(waits.fair.p99 < waits.plain.p99 / 10),
    });
    const moves = await priorityMoveCost(prefix('tenant-moves'));
    rows.push({
      measure: `Redis CPU per priority 1 job with ${moves.moved} priority 5 jobs of its tenant waiting (all move)`,
      arcflow: `${moves.urgent.toFixed(0)} µs`,
      baseline: `${moves.same.toFixed(0)} µs (a priority 5 job)`,
      ratio: `${(moves.urgent / moves.same).toFixed(1)}x`,
      target: 'info',
      verdict: '-',
    });
  }
  if (wanted('cost')) {
    progress('cost reservation per provider call');
    const cost = await reservationCost(prefix('cost-reserve'));
    rows.push({
      measure: 'Redis CPU per one-call run, pricing + tenant_budgets vs none',
      arcflow: `${cost.costed.cpu.toFixed(0)} µs (${cost.costed.commands.toFixed(1)} cmds)`,
      baseline: `${cost.plain.cpu.toFixed(0)} µs (${cost.plain.commands.toFixed(1)} cmds)`,
      ratio: `${(cost.costed.cpu / cost.plain.cpu).toFixed(2)}x`,
      target: 'info (two scripts per priced call)',
      verdict: '-',
    });
  }
  if (wanted('overhead')) {
    progress('per-iteration overhead');
    const raw = p50(await rawFlowIteration(prefix('raw-flow')));
    const engine = p50(await engineIteration(prefix('iteration')));
    const local = p50(await localIteration());
    rows.push({
      measure: 'iteration p50, no-op tool (vs raw BullMQ flow)',
      arcflow: ms(engine),
      baseline: ms(raw),
      ratio: `${(engine / raw).toFixed(2)}x`,
      target: '<= 2x raw',
      verdict: verdict(engine <= 2 * raw),
    });
    rows.push({
      measure: 'iteration p50, no-op tool (vs runLocal)',
      arcflow: ms(engine),
      baseline: ms(local),
      ratio: `${(engine / local).toFixed(1)}x`,
      target: 'info',
      verdict: '-',
    });
  }
  if (wanted('children')) {
    progress('child runs (agents as tools)');
    rows.push(...(await childRunRows(prefix('children'))));
  }
  if (wanted('workflow')) {
    progress(`workflow of ${LAYERS.join('+')} no-op tool steps`);
    const raw = p50(await rawLayeredFlowTimes(prefix('raw-layers')));
    const engine = p50(await workflowRunTimes(prefix('layers')));
    rows.push({
      measure: `workflow run p50, ${LAYERS.reduce((sum, size) => sum + size, 0)} no-op tool steps in ${LAYERS.length} layers (vs raw BullMQ flows)`,
      arcflow: ms(engine),
      baseline: ms(raw),
      ratio: `${(engine / raw).toFixed(2)}x`,
      target: '<= 2x raw',
      verdict: verdict(engine <= 2 * raw),
    });
  }
  if (wanted('overview')) {
    progress('the console overview over 2,000 runs, against listing them');
    const cost = await overviewCost(prefix('overview'));
    rows.push({
      measure: `GET /v1/overview (hour), ${cost.runs} ended runs (vs listing them, 500 a page)`,
      arcflow: ms(cost.overviewMs),
      baseline: ms(cost.listMs),
      ratio: `${(cost.overviewMs / cost.listMs).toFixed(2)}x`,
      target: 'info',
      verdict: '-',
    });
  }
  if (wanted('tokens')) {
    progress("an end user's token against an API key, reading a run over HTTP");
    const tokens = await tokenCheckCost(prefix('tokens'));
    rows.push({
      measure: 'GET /v1/runs/{id} p50 with a thread token (vs a read key)',
      arcflow: ms(tokens.tokenP50Ms),
      baseline: ms(tokens.keyP50Ms),
      ratio: `${(tokens.tokenP50Ms / tokens.keyP50Ms).toFixed(2)}x`,
      target: 'info',
      verdict: '-',
    });
    rows.push({ measure: '  createToken p50 (in process)', arcflow: ms(tokens.createP50Ms), baseline: '-', ratio: '-', target: 'info', verdict: '-' });
  }
  if (wanted('http')) {
    progress('enqueue over HTTP against client.enqueue');
    const { http, client } = await enqueueOverHttp(prefix('http-enqueue'));
    rows.push({
      measure: 'enqueue p50, POST /v1/runs (vs client.enqueue)',
      arcflow: ms(http.p50Ms),
      baseline: ms(client.p50Ms),
      ratio: `${(http.p50Ms / client.p50Ms).toFixed(2)}x`,
      target: 'info',
      verdict: '-',
    });
    rows.push({
      measure: '  enqueues/s, 32 in flight (vs client.enqueue)',
      arcflow: http.perSecond.toFixed(0),
      baseline: client.perSecond.toFixed(0),
      ratio: `${((http.perSecond / client.perSecond) * 100).toFixed(0)}%`,
      target: 'info',
      verdict: '-',
    });
    progress('Redis CPU with 500 event followers (about 20 s)');
    const followers = await followerCost(prefix('http-follow'));
    rows.push({
      measure: 'Redis CPU per 4 s, 50 waiting runs, 500 SSE followers (vs none)',
      arcflow: `${followers.sse.toFixed(0)} ms`,
      baseline: `${followers.none.toFixed(0)} ms`,
      ratio: signedMs(followers.sse - followers.none),
      target: '< +40 ms (1% of a core)',
      verdict: verdict(followers.sse - followers.none < 40),
    });
    rows.push({
      measure: '  the same 500 followers polling every 100 ms (client.events)',
      arcflow: `${followers.polling.toFixed(0)} ms`,
      baseline: `${followers.none.toFixed(0)} ms`,
      ratio: signedMs(followers.polling - followers.none),
      target: 'info',
      verdict: '-',
    });
  }
  if (wanted('scripts')) {
    progress('Redis time per script, SLOWLOG (about 20 s)');
    const { arcflow, plain } = await scriptCosts(prefix('scripts'));
    const perRun = (costs: readonly ScriptCost[], of: (cost: ScriptCost) => number) => costs.reduce((sum, cost) => sum + cost.callsPerRun * of(cost), 0);
    const summary = (costs: readonly ScriptCost[]) =>
      `${perRun(costs, (cost) => cost.usPerCall).toFixed(0)} µs in ${perRun(costs, () => 1).toFixed(1)} calls (commands ${perRun(costs, (cost) => cost.commandsUsPerCall).toFixed(0)} µs)`;
    const bullmq = arcflow.filter((cost) => cost.script.startsWith('BullMQ'));
    const store = arcflow.filter((cost) => cost.script.startsWith('store'));
    rows.push({
      measure: "Redis time in scripts per 8 tool calls: BullMQ's (SLOWLOG)",
      arcflow: summary(bullmq),
      baseline: summary(plain),
      ratio: `${(perRun(bullmq, (cost) => cost.usPerCall) / perRun(plain, (cost) => cost.usPerCall)).toFixed(2)}x`,
      target: 'info',
      verdict: '-',
    });
    rows.push({ measure: "  the run store's scripts", arcflow: summary(store), baseline: '-', ratio: '-', target: 'info', verdict: '-' });
    for (const cost of arcflow.slice(0, 7)) {
      const same = plain.find((other) => other.script === cost.script);
      rows.push({
        measure: `  ${cost.script}`,
        arcflow: `${cost.callsPerRun.toFixed(1)} × ${cost.usPerCall.toFixed(1)} µs (commands ${cost.commandsUsPerCall.toFixed(1)})`,
        baseline: same ? `${same.callsPerRun.toFixed(1)} × ${same.usPerCall.toFixed(1)} µs (commands ${same.commandsUsPerCall.toFixed(1)})` : '-',
        ratio: '-',
        target: 'info',
        verdict: '-',
      });
    }
  }
  if (wanted('cluster')) {
    progress('Redis Cluster: an idle worker on 1, 16 and 64 partitions (about 30 s)');
    const idle = await idleWorkerCost([1, 16, 64]);
    rows.push({
      measure: 'Redis CPU of an idle worker (1 agent, 1 tool), 3-node cluster, 16 / 64 partitions',
      arcflow: [16, 64].map((count) => `${idle.byPartitions.get(count)!.toFixed(1)} ms/s`).join(' / '),
      baseline: `${idle.byPartitions.get(1)!.toFixed(1)} ms/s (1 partition)`,
      ratio: '-',
      target: 'info',
      verdict: '-',
    });
    progress('Redis Cluster: 1 node against 3, 8 partitions');
    const one = await clusterThroughput(1);
    const three = await clusterThroughput(3);
    rows.push({
      measure: 'tool calls/s, Redis Cluster of 3 nodes (vs 1 node), 8 partitions, 1 worker',
      arcflow: three.callsPerSecond.toFixed(0),
      baseline: one.callsPerSecond.toFixed(0),
      ratio: `${(three.callsPerSecond / one.callsPerSecond).toFixed(2)}x`,
      target: 'info (2 cores)',
      verdict: '-',
    });
    rows.push({
      measure: '  share of script calls per node, 3 nodes',
      arcflow: three.nodes.map((node) => `${(node.scriptShare * 100).toFixed(0)}%`).join(' / '),
      baseline: '100%',
      ratio: '-',
      target: 'info',
      verdict: '-',
    });
    rows.push({
      measure: '  Redis CPU per tool call, per node (1 node: all of it)',
      arcflow: three.nodes.map((node) => `${node.cpuPerCallUs.toFixed(0)} µs`).join(' / '),
      baseline: `${one.nodes[0]!.cpuPerCallUs.toFixed(0)} µs`,
      ratio: `${(three.nodes.reduce((sum, node) => sum + node.cpuPerCallUs, 0) / one.nodes[0]!.cpuPerCallUs).toFixed(2)}x (sum)`,
      target: 'info',
      verdict: '-',
    });
  }
  if (wanted('throughput')) {
    for (const workers of [1, 2]) {
      progress(`throughput with ${workers} worker process(es)`);
      const { engine, raw, floor, engineToRaw, floorToRaw, engineCpu, rawCpu, floorCpu, engineCommands, rawCommands, floorCommands } = await toolJobsPerSecond(
        prefix(`tp-${workers}`),
        workers,
      );
      rows.push({
        measure: `tool jobs/s, ${workers} worker process(es), warm, ${THROUGHPUT_TRIALS} paired trials`,
        arcflow: engine.toFixed(0),
        baseline: raw.toFixed(0),
        ratio: `${(engineToRaw * 100).toFixed(0)}%`,
        target: '>= 40% of raw',
        verdict: verdict(engineToRaw >= 0.4),
      });
      rows.push({
        measure: `  CPU per 8 tool calls, ${workers} worker process(es)`,
        arcflow: cpuText(engineCpu),
        baseline: cpuText(rawCpu),
        ratio: `${(cpuTotal(engineCpu) / cpuTotal(rawCpu)).toFixed(2)}x`,
        target: 'info',
        verdict: '-',
      });
      rows.push({
        measure: `  Redis CPU per tool call, ${workers} worker process(es)`,
        arcflow: redisPerCall(engineCpu),
        baseline: redisPerCall(rawCpu),
        ratio: `${(engineCpu.redis / rawCpu.redis).toFixed(2)}x`,
        target: '<= 1.5x raw',
        verdict: verdict(engineCpu.redis <= 1.5 * rawCpu.redis),
      });
      rows.push({
        measure: `  Redis commands per 8 tool calls, ${workers} worker process(es)`,
        arcflow: commandsText(engineCommands),
        baseline: commandsText(rawCommands),
        ratio: `${(engineCommands.all / rawCommands.all).toFixed(2)}x`,
        target: 'info',
        verdict: '-',
      });
      rows.push({
        measure: `  design floor (same jobs, no run store), ${workers} process(es)`,
        arcflow: `${floor.toFixed(0)}/s, ${cpuText(floorCpu)}, ${floorCommands.all.toFixed(0)} cmds`,
        baseline: raw.toFixed(0),
        ratio: `${(floorToRaw * 100).toFixed(0)}%`,
        target: 'info',
        verdict: '-',
      });
      rows.push({
        measure: `  Redis CPU per tool call, design floor, ${workers} process(es)`,
        arcflow: redisPerCall(floorCpu),
        baseline: redisPerCall(rawCpu),
        ratio: `${(floorCpu.redis / rawCpu.redis).toFixed(2)}x`,
        target: 'info',
        verdict: '-',
      });
    }
  }
  if (wanted('parallel')) {
    progress('8 tools x 250 ms');
    const latency = await parallelNapLatency(prefix('nap'));
    rows.push({
      measure: 'run of 8 parallel 250 ms tools, p50',
      arcflow: ms(latency),
      baseline: '250 ms (one tool)',
      ratio: `${(latency / 250).toFixed(2)}x`,
      target: '< 400 ms',
      verdict: verdict(latency < 400),
    });
  }
  if (wanted('finished')) {
    for (const iterations of [3, 50]) {
      progress(`a finished run of ${iterations} iterations: its Redis memory against its content`);
      const memory = await finishedRunMemory(prefix(`finished-${iterations}`), iterations);
      rows.push({
        measure: `finished run memory, ${iterations} iterations (MEMORY USAGE of its ${memory.keys} keys, jobs included, vs its content's JSON)`,
        arcflow: kib(memory.bytes),
        baseline: kib(memory.contentBytes),
        ratio: `${(memory.bytes / memory.contentBytes).toFixed(2)}x`,
        target: '<= 1.25x, <= 3 keys',
        verdict: verdict(memory.bytes <= 1.25 * memory.contentBytes && memory.keys <= 3),
      });
    }
  }
  if (wanted('memory')) {
    progress('memory over 10k runs (about a minute)');
    const memory = await memoryProfile(prefix('memory'));
    rows.push(growthRow('worker RSS after 1k -> 10k runs', memory.rss1k, memory.rss10k, 20));
    rows.push({
      measure: 'Redis bytes per retained run (jobs included)',
      arcflow: `${(memory.bytesPerRun / 1024).toFixed(1)} KiB`,
      baseline: '-',
      ratio: '-',
      target: 'info',
      verdict: '-',
    });
    progress('memory again, with the heap capped at 1 GiB (about a minute)');
    const capped = await memoryProfile(prefix('memory-capped'), `--max-old-space-size=${CAPPED_HEAP_MIB}`);
    rows.push(growthRow(`  the same, NODE_OPTIONS=--max-old-space-size=${CAPPED_HEAP_MIB}`, capped.rss1k, capped.rss10k, 20));
    progress('heap after full GC over 10k runs (in-process worker)');
    const heap = await heapAfterGc(prefix('heap'));
    rows.push(growthRow('  heap after full GC, 1k -> 10k runs (leak check)', heap.heap1k, heap.heap10k));
  }
  if (wanted('recovery')) {
    progress('recovery after SIGKILL');
    const seconds = await recoverySeconds(prefix('recovery'));
    rows.push({
      measure: 'recovery after SIGKILL (kill -> call restarts)',
      arcflow: `${seconds.toFixed(1)} s`,
      baseline: 'lock 5 s + stall checks 2 s',
      ratio: '-',
      target: '< 10 s',
      verdict: verdict(seconds < 10),
    });
    for (const restart of [false, true]) {
      progress(`recovery of 64 runs in flight, ${restart ? 'both workers killed and restarted' : 'one of two workers killed'}`);
      const recovery = await recoveryAfterKill(prefix(restart ? 'recovery-both' : 'recovery-one'), 64, restart);
      const from = restart ? 'first ready' : 'kill';
      rows.push(
        {
          measure: `${restart ? 'both of 2 workers SIGKILLed, restarted' : '1 of 2 workers SIGKILLed'}, 64 runs: ${from} -> interrupted calls run again, p95 (${recovery.interrupted} calls)`,
          arcflow: `${recovery.restartP95.toFixed(2)} s`,
          baseline: 'lock 5 s + stall check 2 s (the fallback)',
          ratio: '-',
          target: '<= 1.0 s',
          verdict: verdict(recovery.restartP95 <= 1),
        },
        {
          measure: `  ${from} -> last run ends, less its own remaining work (1 s call)`,
          arcflow: `${recovery.lastRunEnd.toFixed(2)} s`,
          baseline: '-',
          ratio: '-',
          target: '<= 1.0 s',
          verdict: verdict(recovery.lastRunEnd <= 1),
        },
      );
    }
  }
  if (wanted('startup')) rows.push(...(await startupRows(prefix('startup'), progress)));
  if (wanted('settings')) {
    progress('a provider call with and without model settings');
    rows.push(wireRow(), await modelSettingsRow());
  }
  if (wanted('transcript')) {
    progress('a 301-iteration run and a 2,000-iteration run, each tool result 4 KiB');
    const run = await transcriptRun(prefix('transcript'), 301, [10, 290]);
    const [early, late] = run.windows as [TranscriptWindow, TranscriptWindow];
    rows.push(
      flatRow('engine time per iteration at 290-300 (vs 10-20), 4 KiB results', late.iterationMs, early.iterationMs, ms, 1.25),
      flatRow('Redis bytes in per iteration at 290-300 (vs 10-20), 4 KiB results', late.bytesIn, early.bytesIn, kib, 1.25),
    );
    progress('310 runs of two calls on one thread, each tool result 4 KiB');
    const [tenth, late300] = (await threadRuns(prefix('transcript-thread'), 310, [10, 300])) as [ThreadWindow, ThreadWindow];
    rows.push(
      flatRow('thread: engine time per iteration, runs 300-310 (vs 10-20)', late300.iterationMs, tenth.iterationMs, ms, 1.25),
      flatRow('thread: Redis bytes in per iteration, runs 300-310 (vs 10-20)', late300.bytesIn, tenth.bytesIn, kib, 1.25),
      flatRow('thread: enqueue to first provider call, runs 300-310 (vs 10-20)', late300.startMs, tenth.startMs, ms),
    );
    const long = await transcriptRun(prefix('transcript-long'), 2_000, [10, 1_985]);
    const [first, last] = long.windows as [TranscriptWindow, TranscriptWindow];
    rows.push({
      measure: '2,000-iteration run completes: total time; per iteration at 1,985-1,995 (vs 10-20)',
      arcflow: `${(long.totalMs / 1000).toFixed(1)} s; ${ms(last.iterationMs)}, ${kib(last.bytesIn)}`,
      baseline: `${ms(first.iterationMs)}, ${kib(first.bytesIn)}`,
      ratio: `${(last.iterationMs / first.iterationMs).toFixed(2)}x time, ${(last.bytesIn / first.bytesIn).toFixed(2)}x bytes`,
      target: 'completes',
      verdict: 'yes',
    });
  }
  if (wanted('state')) {
    progress('301-iteration runs whose tool appends 1 KiB to the run state each round, and the same with no state');
    const noting = await transcriptRun(prefix('state'), 301, [10, 290], stateAgents.noting);
    const plainRun = await transcriptRun(prefix('state-none'), 301, [10, 290], stateAgents.plain);
    const [early, late] = noting.windows as [TranscriptWindow, TranscriptWindow];
    const plainLate = plainRun.windows[1]!;
    const mean = (windows: readonly TranscriptWindow[]) => windows.reduce((sum, window) => sum + window.iterationMs, 0) / windows.length;
    rows.push(
      flatRow('state: Redis bytes in per iteration at 290-300 (vs 10-20), 1 KiB appended a round', late.bytesIn, early.bytesIn, kib, 1.25),
      flatRow('state: engine time per iteration at 290-300 (vs 10-20)', late.iterationMs, early.iterationMs, ms, 1.25),
      flatRow('state: engine time per iteration, with state (vs the same run without), both windows', mean(noting.windows), mean(plainRun.windows), ms),
      flatRow('state: Redis bytes in per iteration at 290-300, with state (vs without)', late.bytesIn, plainLate.bytesIn, kib),
    );
  }
  if (wanted('metrics') || wanted('metrics-aa')) {
    progress('worker CPU per run, metrics off and on (Prometheus); one collection over 50 queues');
    // metrics-aa: both arms without metrics, for the noise a ratio carries on this machine.
    const aa = !wanted('metrics');
    const http = await workerCpuWithMetrics(prefix('metrics-http-off'), prefix('metrics-http-on'), { model: 'http', aa });
    const cpu = await workerCpuWithMetrics(prefix('metrics-off'), prefix('metrics-on'), { model: 'instant', aa });
    const spread = (measured: MetricsCpu) =>
      `${measured.ratio.toFixed(3)}x median (trials ${percentile(measured.trialRatios, 10).toFixed(2)}-${percentile(measured.trialRatios, 90).toFixed(2)}, pooled ${measured.pooled.toFixed(3)}x)`;
    const arms = aa ? 'A/A, both off' : 'metrics on (Prometheus) vs off';
    progress(`trial ratios, http: ${http.trialRatios.map((ratio) => ratio.toFixed(3)).join(' ')}`);
    progress(`trial ratios, instant: ${cpu.trialRatios.map((ratio) => ratio.toFixed(3)).join(' ')}`);
    rows.push({
      measure: `worker CPU per run (1 tool round, OpenAI-compatible model over HTTP), ${arms}`,
      arcflow: ms(http.on),
      baseline: ms(http.off),
      ratio: spread(http),
      target: aa ? 'info' : '<= 1.05x',
      verdict: aa ? '-' : verdict(http.ratio <= 1.05),
    });
    rows.push({
      measure: `worker CPU per run (1 tool round, instant in-process model), ${arms}`,
      arcflow: ms(cpu.on),
      baseline: ms(cpu.off),
      ratio: spread(cpu),
      target: 'info',
      verdict: '-',
    });
    if (!aa) {
      rows.push({
        measure: 'worker CPU of one scrape of its /metrics (collection, Redis read, text)',
        arcflow: ms(cpu.scrapeMs),
        baseline: '-',
        ratio: '-',
        target: 'info',
        verdict: '-',
      });
    }
  }
  if (wanted('metrics')) {
    const recording = recordingCost();
    rows.push({
      measure: `CPU of recording one run's ${recording.values} values in process: arcflow's series (vs the SDK's own instruments)`,
      arcflow: `${recording.series.toFixed(2)} µs`,
      baseline: `${recording.sdk.toFixed(2)} µs`,
      ratio: `${(recording.series / recording.sdk).toFixed(2)}x`,
      target: 'info',
      verdict: '-',
    });
    const QUEUES = 50;
    const collection = await collectionCost(prefix('metrics-collection'), QUEUES);
    rows.push({
      measure: `one collection of the queue gauges, ${QUEUES} queues (vs BullMQ's reads queue by queue)`,
      arcflow: `${ms(collection.oneTrip)}, ${collection.oneTripCommands.toFixed(0)} commands`,
      baseline: `${ms(collection.perQueue)}, ${collection.perQueueCommands.toFixed(0)} commands`,
      ratio: `${(collection.oneTrip / collection.perQueue).toFixed(2)}x`,
      target: '1 round trip',
      verdict: verdict(collection.oneTripCommands <= 2),
    });
  }
  if (wanted('streaming')) {
    progress('streaming: first text, writes per answer, throughput');
    rows.push(await firstTextRow(prefix('stream-first-text')));
    rows.push(await writesRow(prefix('stream-writes')));
    rows.push(...(await streamingThroughputRows((name) => prefix(`stream-${name}`))));
  }
  if (wanted('stream-costs')) {
    progress('streaming: Redis commands and bytes of a run not asked to stream, against one asked');
    rows.push(...(await streamCostRows(prefix)));
  }
  if (wanted('viewers')) {
    progress('many viewers: a lone SSE client, then 100, 1,000 and 10,000 clients of one run on one serve');
    rows.push(...(await viewersRows(prefix('viewers'), progress)));
  }
  if (wanted('tracing')) {
    progress("tracing's cost in the workers: CPU per run, tracing on and off, in alternating trials");
    const redis = new Redis(REDIS_URL);
    const cost = await tracingWorkerCpu(redis, { trials: 8, warmup: 1 }).finally(() => redis.quit());
    rows.push({
      measure: `workers' CPU per run of ${FAN} tool calls, tracing on (OTLP to loopback) vs off, paired median of ${cost.trials} trials`,
      arcflow: ms(cost.on),
      baseline: ms(cost.off),
      ratio: `${cost.ratio.toFixed(2)}x`,
      target: '<= 1.2x (issue #51)',
      verdict: verdict(cost.ratio <= 1.2),
    });
    // Last: once started, the SDK stays registered in this process.
    progress('per-iteration overhead, tracing off and on');
    const off = p50(await engineIteration(prefix('untraced')));
    const on = p50(await withTracing(() => engineIteration(prefix('traced'))));
    rows.push({
      measure: 'iteration p50, tracing on (OTLP to loopback) vs off',
      arcflow: ms(on),
      baseline: ms(off),
      ratio: `${(on / off).toFixed(2)}x`,
      target: 'info',
      verdict: '-',
    });
  }
  if (wanted('waiting')) {
    progress('the watchdog beside 10,000 waiting runs');
    rows.push(await waitingWatchdogRow(prefix));
  }
  printTable(rows);
} finally {
  for (const name of prefixes) await cleanupPrefix(name, REDIS_URL);
}
