import { createServer } from 'node:net';
import { ConfigError } from '@arcflow/core';
import { TEST_REDIS_URL, testPrefix } from '@arcflow/testing';
import { describe, expect, it } from 'vitest';
import { runArcflow } from '../../cli/test/run-arcflow.ts';
import { readWorkerEnv } from '../src/env.ts';

const EXAMPLE = new URL('../../../examples/weather-agent.ts', import.meta.url).pathname;
const env = { ...process.env, REDIS_URL: TEST_REDIS_URL, ARCFLOW_PREFIX: testPrefix('metrics-options'), OPENAI_API_KEY: '', OPENAI_BASE_URL: '' };

describe('the worker metrics settings', () => {
  it('reads the port, the OTLP metrics URL and the export interval from the environment', () => {
    expect(readWorkerEnv({}).metrics).toEqual({ port: undefined, otlpUrl: undefined, exportIntervalMs: 60_000 });
    expect(readWorkerEnv({ ARCFLOW_METRICS_PORT: '9464', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/', OTEL_METRIC_EXPORT_INTERVAL: '5000' }).metrics).toEqual({
      port: 9464,
      otlpUrl: 'http://collector:4318/v1/metrics',
      exportIntervalMs: 5000,
    });
    // The metrics endpoint is taken as it is, and wins over the shared one.
    expect(readWorkerEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://a:4318', OTEL_EXPORTER_OTLP_METRICS_ENDPOINT: 'http://b:4318/custom' }).metrics.otlpUrl).toBe(
      'http://b:4318/custom',
    );
  });

  it('refuses a bad port or interval, naming the variable', () => {
    for (const value of ['abc', '0', '65536', '-1', '80.5']) expect(() => readWorkerEnv({ ARCFLOW_METRICS_PORT: value })).toThrow(ConfigError);
    expect(() => readWorkerEnv({ ARCFLOW_METRICS_PORT: 'abc' })).toThrow('ARCFLOW_METRICS_PORT must be a port number from 1 to 65535, got "abc"');
    expect(() => readWorkerEnv({ OTEL_METRIC_EXPORT_INTERVAL: 'soon' })).toThrow('OTEL_METRIC_EXPORT_INTERVAL must be a whole number of milliseconds >= 1, got "soon"');
  });
});

describe('arcflow worker --metrics-port', () => {
  it('is listed in --help with its environment variable', async () => {
    const help = await runArcflow(env, '--help');
    expect(help.stdout).toContain('[--metrics-port N]');
    expect(help.stdout).toContain('ARCFLOW_METRICS_PORT');
    expect(help.stdout).toContain('OTEL_METRIC_EXPORT_INTERVAL');
  });

  it('refuses a bad port before starting anything, in one line', async () => {
    const bad = await runArcflow(env, 'worker', '--module', EXAMPLE, '--metrics-port', 'nine');
    expect(bad.code).toBe(1);
    expect(bad.stderr.trim()).toBe('arcflow: --metrics-port must be a port number from 1 to 65535, got "nine"');
    const fromEnv = await runArcflow({ ...env, ARCFLOW_METRICS_PORT: '70000' }, 'worker', '--module', EXAMPLE);
    expect(fromEnv.code).toBe(1);
    expect(fromEnv.stderr.trim()).toBe('arcflow: ARCFLOW_METRICS_PORT must be a port number from 1 to 65535, got "70000"');
  });

  it('says so when the port is taken', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, resolve));
    const { port } = taken.address() as { port: number };
    try {
      const result = await runArcflow(env, 'worker', '--module', EXAMPLE, '--metrics-port', String(port));
      expect(result.code).toBe(1);
      expect(result.stderr.trim()).toBe(`arcflow: metrics port ${port} (--metrics-port or ARCFLOW_METRICS_PORT): cannot listen, the port is in use`);
    } finally {
      await new Promise<void>((resolve) => taken.close(() => resolve()));
    }
  });
});
