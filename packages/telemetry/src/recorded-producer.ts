import { type Attributes, type HrTime, ValueType } from '@opentelemetry/api';
import { millisToHrTime } from '@opentelemetry/core';
import { emptyResource } from '@opentelemetry/resources';
import {
  AggregationTemporality,
  type AggregationTemporalitySelector,
  type CollectionResult,
  DataPointType,
  type Histogram,
  InstrumentType,
  type MetricData,
  type MetricProducer,
} from '@opentelemetry/sdk-metrics';
import { METER_NAME } from './metrics.ts';
import type { RecordedMetrics } from './record-metrics.ts';
import type { Cell, SeriesTable } from './series.ts';

/** The `arcflow` meter's scope, as the SDK names a meter got with a name only. */
const SCOPE = Object.freeze({ name: METER_NAME, version: '', schemaUrl: undefined });

/** A series to report: its attributes, where its point starts, and the cell it reads. */
interface Point {
  readonly attributes: Attributes;
  readonly startTime: HrTime;
  readonly cell: Cell;
}

/** One reader's view of one metric: which cell of each series it reads, and how. */
class MetricView {
  private readonly cell: number;
  private readonly boundaries: number[];
  private lastCollection: HrTime | undefined;

  constructor(
    private readonly table: SeriesTable,
    private readonly temporality: AggregationTemporality,
  ) {
    // The cumulative readers share each series' first cell, which a collection only reads; a delta reader has one of its own.
    this.cell = temporality === AggregationTemporality.DELTA ? table.addCell() : 0;
    this.boundaries = [...(table.metric.buckets ?? [])];
  }

  /**
   * The metric's points as the SDK reports them: a cumulative point starts at its series' first
   * record; a delta point holds what came since the reader's last collection, and starts there
   * when that collection reported the series (else at its first record since). A series with
   * nothing to report has no point, and a metric without points is left out.
   */
  collect(endTime: HrTime): MetricData | undefined {
    const delta = this.temporality === AggregationTemporality.DELTA;
    const points: Point[] = [];
    for (const series of this.table.all) {
      const cell = series.cells[this.cell] as Cell;
      if (cell.firstAt === undefined) {
        cell.reported = false;
        continue;
      }
      const startTime = delta && cell.reported && this.lastCollection ? this.lastCollection : millisToHrTime(cell.firstAt);
      points.push({ attributes: series.attributes, startTime, cell });
    }
    const data = points.length > 0 ? this.metricData(points, endTime) : undefined;
    if (delta) {
      for (const { cell } of points) {
        cell.reset();
        cell.reported = true;
      }
      this.lastCollection = endTime;
    }
    return data;
  }

  private metricData(points: readonly Point[], endTime: HrTime): MetricData {
    const { name, description, unit } = this.table.metric;
    const common = { descriptor: { name, description, unit, valueType: ValueType.DOUBLE }, aggregationTemporality: this.temporality };
    if (this.table.metric.kind === 'counter') {
      return {
        ...common,
        dataPointType: DataPointType.SUM,
        isMonotonic: true,
        dataPoints: points.map(({ attributes, startTime, cell }) => ({ attributes, startTime, endTime, value: cell.sum })),
      };
    }
    return {
      ...common,
      dataPointType: DataPointType.HISTOGRAM,
      dataPoints: points.map(({ attributes, startTime, cell }) => ({ attributes, startTime, endTime, value: this.histogram(cell) })),
    };
  }

  /** A copy of the cell's histogram (the exporter may still hold it while recording goes on). */
  private histogram(cell: Cell): Histogram {
    const counted = cell.count > 0;
    return {
      min: counted ? cell.min : undefined,
      max: counted ? cell.max : undefined,
      sum: cell.sum,
      buckets: { boundaries: this.boundaries, counts: [...cell.buckets] },
      count: cell.count,
    };
  }
}

/**
 * Hands one reader the metrics this process recorded (record-metrics.ts), at that reader's
 * temporality (`temporalityOf`: Prometheus's is cumulative, OTLP's per
 * `OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE`), as the `arcflow` meter's scope. The
 * reader adds them to what the SDK's own meters hold (the observed gauges).
 */
export class RecordedMetricsProducer implements MetricProducer {
  private readonly views: MetricView[];

  constructor(recorded: RecordedMetrics, temporalityOf: AggregationTemporalitySelector) {
    this.views = Object.values(recorded).map((table) => new MetricView(table, temporalityOf(table.metric.kind === 'counter' ? InstrumentType.COUNTER : InstrumentType.HISTOGRAM)));
  }

  async collect(): Promise<CollectionResult> {
    const endTime = millisToHrTime(Date.now());
    const metrics = this.views.flatMap((view) => view.collect(endTime) ?? []);
    // The reader keeps its own resource; this one is ignored.
    return { resourceMetrics: { resource: emptyResource(), scopeMetrics: metrics.length > 0 ? [{ scope: SCOPE, metrics }] : [] }, errors: [] };
  }
}
