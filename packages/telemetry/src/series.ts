import type { Attributes } from '@opentelemetry/api';
import type { MetricDefinition } from './metrics.ts';

/**
 * A series (one metric, one attribute set) as one kind of reader sees it: a cumulative reader
 * everything since the series' first record, a delta reader what came since its last collection.
 * A counter keeps its total in `sum`; a histogram keeps what the SDK's explicit-bucket histogram
 * keeps, with the same buckets (one per boundary, inclusive upper bounds, and one above the last).
 */
export class Cell {
  /** Epoch ms of the first record this cell holds (the point's start), undefined while it holds none. */
  firstAt: number | undefined = undefined;
  count = 0;
  sum = 0;
  min = Number.POSITIVE_INFINITY;
  max = Number.NEGATIVE_INFINITY;
  readonly buckets: number[];
  /** A delta reader's: whether its last collection reported this series (then the next point starts at that collection). */
  reported = false;

  constructor(bucketCount: number) {
    this.buckets = new Array<number>(bucketCount).fill(0);
  }

  /** Empties a delta cell once its reader has collected it. */
  reset(): void {
    this.firstAt = undefined;
    this.count = 0;
    this.sum = 0;
    this.min = Number.POSITIVE_INFINITY;
    this.max = Number.NEGATIVE_INFINITY;
    this.buckets.fill(0);
  }
}

/** The bucket of `value`: the first boundary at or above it, or the one past the last (the SDK's `binarySearchUB`). */
function bucketOf(boundaries: readonly number[], value: number): number {
  let low = 0;
  let high = boundaries.length - 1;
  let found = boundaries.length;
  while (high >= low) {
    const middle = (low + high) >>> 1;
    if ((boundaries[middle] as number) < value) low = middle + 1;
    else {
      found = middle;
      high = middle - 1;
    }
  }
  return found;
}

/**
 * One attribute set of one metric, aggregated in process: a record is a few additions into its
 * cells (one for the cumulative readers, one per delta reader), with no attribute hashing and no
 * allocation. The readers' producer turns the cells into data points at collection.
 */
export class Series {
  readonly cells: Cell[];

  constructor(
    readonly attributes: Attributes,
    private readonly boundaries: readonly number[],
    cellCount: number,
  ) {
    this.cells = Array.from({ length: cellCount }, () => new Cell(boundaries.length + 1));
  }

  /** A cell more, for a delta reader that started after this series. */
  addCell(): void {
    this.cells.push(new Cell(this.boundaries.length + 1));
  }

  /**
   * A histogram's value. As the SDK's histogram: a negative value (or not a number) is dropped, NaN
   * starts the series but is not counted.
   */
  record(value: number): void {
    if (typeof value !== 'number' || value < 0) return;
    const counted = !Number.isNaN(value);
    const bucket = counted ? bucketOf(this.boundaries, value) : 0;
    for (let index = 0; index < this.cells.length; index += 1) {
      const cell = this.cells[index] as Cell;
      cell.firstAt ??= Date.now();
      if (!counted) continue;
      cell.count += 1;
      cell.sum += value;
      if (value < cell.min) cell.min = value;
      if (value > cell.max) cell.max = value;
      (cell.buckets[bucket] as number) += 1;
    }
  }

  /** A counter's increment. As the SDK's counter: a negative increment (or not a number) is dropped. */
  add(value: number): void {
    if (typeof value !== 'number' || value < 0) return;
    for (let index = 0; index < this.cells.length; index += 1) {
      const cell = this.cells[index] as Cell;
      cell.firstAt ??= Date.now();
      cell.sum += value;
    }
  }
}

/** Where a forwarding table's records go: an instrument of a meter provider arcflow did not make (the application's). */
export interface RecordSink {
  record(value: number, attributes: Attributes): void;
}

/** A series whose records go straight to an instrument of the application's meter provider, which aggregates them. */
class ForwardingSeries extends Series {
  constructor(
    attributes: Attributes,
    private readonly sink: RecordSink,
  ) {
    super(attributes, [], 0);
  }

  override record(value: number): void {
    this.sink.record(value, this.attributes);
  }

  override add(value: number): void {
    this.sink.record(value, this.attributes);
  }
}

/** Distinct attribute sets a metric keeps before the rest go to one overflow series (the SDK's default limit). */
export const CARDINALITY_LIMIT = 2000;
const OVERFLOW: Attributes = Object.freeze({ 'otel.metric.overflow': true });

type Level<T> = Map<string, T>;

/**
 * One metric's series, found by their attribute values (up to four; '' for one a set lacks) in
 * nested maps keyed by the values themselves: a lookup allocates nothing, not even a key. The
 * values are bounded by the definitions (agents, tools, models, queues, error codes).
 */
export class SeriesTable {
  /** Every series, in the order they were first recorded (the order their points are reported in). */
  readonly all: Series[] = [];
  private readonly root: Level<Level<Level<Level<Series>>>> = new Map();
  private cellCount = 1;
  private overflow: Series | undefined;

  /** `sink`: each series forwards its records there instead of aggregating them (no reader of arcflow's collects it). */
  constructor(
    readonly metric: MetricDefinition,
    private readonly sink?: RecordSink,
  ) {}

  /** The series of these values, if it was added. */
  find(a: string, b: string, c: string, d: string): Series | undefined {
    return this.root.get(a)?.get(b)?.get(c)?.get(d);
  }

  /** Adds the series of these values, whose attributes `attributes` are (called once {@link find} found none). */
  add(a: string, b: string, c: string, d: string, attributes: Attributes): Series {
    if (this.all.length >= CARDINALITY_LIMIT - 1) return this.overflowSeries();
    const series = this.create(Object.freeze(attributes));
    level(level(level(this.root, a), b), c).set(d, series);
    return series;
  }

  /** A cell more in every series, now and later, for a delta reader; returns its index in `cells`. */
  addCell(): number {
    for (const series of this.all) series.addCell();
    this.cellCount += 1;
    return this.cellCount - 1;
  }

  private overflowSeries(): Series {
    this.overflow ??= this.create(OVERFLOW);
    return this.overflow;
  }

  private create(attributes: Attributes): Series {
    const series = this.sink ? new ForwardingSeries(attributes, this.sink) : new Series(attributes, this.metric.buckets ?? [], this.cellCount);
    this.all.push(series);
    return series;
  }
}

function level<T>(map: Level<T>, key: string): T {
  let next = map.get(key);
  if (next === undefined) {
    next = new Map() as T;
    map.set(key, next);
  }
  return next;
}
