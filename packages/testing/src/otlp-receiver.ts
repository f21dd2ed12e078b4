import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** One exported span, flattened from an OTLP/JSON body. */
export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string | undefined;
  readonly name: string;
  readonly kind: number;
  readonly startNs: bigint;
  readonly endNs: bigint;
  readonly attributes: Record<string, unknown>;
  readonly links: { spanId: string; traceId: string }[];
  readonly status: { code?: number; message?: string };
  readonly eventCount: number;
  readonly serviceName: string | undefined;
}

export interface OtlpReceiver {
  /** Base URL for `OTEL_EXPORTER_OTLP_ENDPOINT`. */
  readonly url: string;
  /** Raw request bodies, per path. */
  readonly bodies: { path: string; contentType: string | undefined; body: string }[];
  spans(): ReceivedSpan[];
  close(): Promise<void>;
}

/** A local OTLP/HTTP receiver on loopback: keeps every body, answers `{}`. */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const bodies: OtlpReceiver['bodies'] = [];
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    bodies.push({ path: req.url ?? '', contentType: req.headers['content-type'], body: Buffer.concat(chunks).toString('utf8') });
    res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    bodies,
    spans: () => bodies.filter((entry) => entry.path === '/v1/traces').flatMap((entry) => flatten(JSON.parse(entry.body))),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

type OtlpValue = { stringValue?: string; intValue?: number | string; doubleValue?: number; boolValue?: boolean; arrayValue?: { values?: OtlpValue[] } };
type OtlpAttribute = { key: string; value: OtlpValue };

function value(v: OtlpValue): unknown {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.arrayValue) return (v.arrayValue.values ?? []).map(value);
  return undefined;
}

const attributes = (list: OtlpAttribute[] = []) => Object.fromEntries(list.map((attribute) => [attribute.key, value(attribute.value)]));

function flatten(body: any): ReceivedSpan[] {
  return (body.resourceSpans ?? []).flatMap((resourceSpans: any) => {
    const serviceName = attributes(resourceSpans.resource?.attributes)['service.name'] as string | undefined;
    return (resourceSpans.scopeSpans ?? []).flatMap((scopeSpans: any) =>
      (scopeSpans.spans ?? []).map((span: any) => ({
        traceId: span.traceId,
        spanId: span.spanId,
        parentSpanId: span.parentSpanId || undefined,
        name: span.name,
        kind: span.kind,
        startNs: BigInt(span.startTimeUnixNano),
        endNs: BigInt(span.endTimeUnixNano),
        attributes: attributes(span.attributes),
        links: (span.links ?? []).map((link: any) => ({ spanId: link.spanId, traceId: link.traceId })),
        status: span.status ?? {},
        eventCount: (span.events ?? []).length,
        serviceName,
      })),
    );
  });
}
