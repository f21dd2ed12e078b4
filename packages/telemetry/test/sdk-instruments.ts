import type { Attributes, Meter } from '@opentelemetry/api';
import type { MetricDefinition } from '../src/metrics.ts';

/** Records one value with its attributes. */
export type Recorder = (value: number, attributes: Attributes) => void;

/**
 * The SDK's own instruments for `metrics`, declared as the table says (as arcflow recorded before
 * it aggregated in process): the reference the recorded series are compared with, in the tests
 * (same export) and the bench (CPU per record).
 */
export function sdkInstruments<Name extends string>(meter: Meter, metrics: Readonly<Record<Name, { readonly metric: MetricDefinition }>>): Record<Name, Recorder> {
  const recorders = {} as Record<Name, Recorder>;
  for (const [name, { metric }] of Object.entries(metrics) as [Name, { readonly metric: MetricDefinition }][]) {
    const options = { unit: metric.unit, description: metric.description };
    if (metric.kind === 'counter') {
      const counter = meter.createCounter(metric.name, options);
      recorders[name] = (value, attributes) => counter.add(value, attributes);
    } else {
      const histogram = meter.createHistogram(metric.name, { ...options, advice: { explicitBucketBoundaries: [...(metric.buckets ?? [])] } });
      recorders[name] = (value, attributes) => histogram.record(value, attributes);
    }
  }
  return recorders;
}
