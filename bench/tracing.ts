import { startTelemetry } from '@arcflow/telemetry';
import { startOtlpReceiver } from '@arcflow/testing';

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
