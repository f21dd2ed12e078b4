import { startTelemetry } from '@arcflow/telemetry';
import { startOtlpReceiver } from '@arcflow/testing';
import type { Redis } from 'ioredis';
import { type Arm, median, pairedRatio, runPairedTrials, startArm, stopArms } from './ab/arms.ts';

/** Runs `work` with the SDK exporting to a local OTLP receiver, then flushes and stops both. */
export async function withTracing<T>(work: () => Promise<T>): Promise<T> {
  const receiver = await startOtlpReceiver();
  const telemetry = await startTelemetry({ endpoint: receiver.url, serviceName: 'arcflow-bench', scheduledDelayMs: 200 });
  try {
    return await work();
  } finally {
    await telemetry.shutdown();
    await receiver.close();
  }
}

/**
 * Tracing's cost where it is paid, in the workers: their CPU per run with tracing on (spans and
 * metrics exported over OTLP to a loopback receiver, as `OTEL_EXPORTER_OTLP_ENDPOINT` turns it
 * on) against off, in `arcflow worker` processes of this tree, trials alternating (arms.ts).
 */
export async function tracingWorkerCpu(redis: Redis, options: { trials: number; warmup: number }): Promise<{ off: number; on: number; ratio: number; trials: number }> {
  const receiver = await startOtlpReceiver();
  try {
    const off = await startArm('tracing-off', '.', 1);
    const on = await startArm('tracing-on', `.::::OTEL_EXPORTER_OTLP_ENDPOINT=${receiver.url}`, 1);
    try {
      await runPairedTrials(redis, [off, on], options);
    } finally {
      await stopArms([off, on]);
    }
    const workers = (arm: Arm, trial: number) => arm.cpu[trial]!.workers;
    return {
      off: median(off.cpu.map((cpu) => cpu.workers)),
      on: median(on.cpu.map((cpu) => cpu.workers)),
      ratio: pairedRatio(off, on, workers),
      trials: options.trials,
    };
  } finally {
    await receiver.close();
  }
}
