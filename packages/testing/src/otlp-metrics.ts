import type { OtlpReceiver } from './otlp-receiver.ts';

/** One data point of an exported metric, flattened from an OTLP/JSON metrics body. */
export interface ReceivedPoint {
  readonly metric: string;
  readonly unit: string;
  readonly attributes: Readonly<Record<string, unknown>>;
  /** A sum's or gauge's value. */
  readonly value?: number;
  /** A histogram's count and sum. */
  readonly count?: number;
  readonly sum?: number;
  readonly timeNs: bigint;
}

type OtlpValue = { stringValue?: string; intValue?: number | string; doubleValue?: number; boolValue?: boolean };
const attributeValue = (v: OtlpValue): unknown => v.stringValue ?? (v.intValue !== undefined ? Number(v.intValue) : (v.doubleValue ?? v.boolValue));
const attributesOf = (list: { key: string; value: OtlpValue }[] = []) => Object.fromEntries(list.map((attribute) => [attribute.key, attributeValue(attribute.value)]));
const numberOf = (point: { asDouble?: number; asInt?: number | string }) => (point.asDouble !== undefined ? point.asDouble : Number(point.asInt ?? 0));

/** Every metric data point the receiver got at `/v1/metrics` (OTLP/JSON), oldest export first. */
export function receivedPoints(receiver: Pick<OtlpReceiver, 'bodies'>): ReceivedPoint[] {
  return receiver.bodies
    .filter((entry) => entry.path === '/v1/metrics')
    .flatMap((entry) => {
      const body = JSON.parse(entry.body);
      return (body.resourceMetrics ?? []).flatMap((resource: any) =>
        (resource.scopeMetrics ?? []).flatMap((scope: any) =>
          (scope.metrics ?? []).flatMap((metric: any): ReceivedPoint[] => {
            const common = { metric: metric.name as string, unit: (metric.unit ?? '') as string };
            if (metric.histogram) {
              return metric.histogram.dataPoints.map((point: any) => ({
                ...common,
                attributes: attributesOf(point.attributes),
                count: Number(point.count),
                sum: point.sum,
                timeNs: BigInt(point.timeUnixNano),
              }));
            }
            const points = (metric.sum ?? metric.gauge)?.dataPoints ?? [];
            return points.map((point: any) => ({ ...common, attributes: attributesOf(point.attributes), value: numberOf(point), timeNs: BigInt(point.timeUnixNano) }));
          }),
        ),
      );
    });
}

/** The newest export's points only (each export of cumulative metrics repeats every series). */
export function latestPoints(receiver: Pick<OtlpReceiver, 'bodies'>): ReceivedPoint[] {
  const points = receivedPoints(receiver);
  const newest = new Map<string, ReceivedPoint>();
  for (const point of points) {
    const key = `${point.metric}|${JSON.stringify(Object.entries(point.attributes).sort())}`;
    const seen = newest.get(key);
    if (!seen || seen.timeNs <= point.timeNs) newest.set(key, point);
  }
  return [...newest.values()];
}
