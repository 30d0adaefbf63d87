import type { CanActivate, Type } from '@nestjs/common';
import { NestMessages } from '../durable.messages';
import { DurableSetupError } from '../../errors';
import type { DurableViewerOptions } from '../interfaces/durable-module-options.interface';

/** A host the viewer answers for: a name (or IP literal), and a port unless any port will do. */
export interface ViewerHost {
  name: string;
  port?: string;
}

/** The viewer's options, checked and with their defaults, as its providers see them. @internal */
export interface ViewerConfig {
  /** Where its controller is mounted (under the application's global prefix). */
  path: string;
  guard?: Type<CanActivate> | CanActivate;
  privateNetwork: boolean;
  hosts: readonly ViewerHost[];
}

/** The injection token of the viewer's `ViewerConfig`. @internal */
export const VIEWER_CONFIG = Symbol('agent-adapter:viewer-config');

/** Loopback, any port: what the viewer answers for unless `hosts` says otherwise. */
export const DEFAULT_VIEWER_HOSTS: readonly string[] = [
  'localhost',
  '127.0.0.1',
  '[::1]',
];

const HOST =
  /^(?:\[([0-9a-f:.]+)\]|([a-z0-9](?:[a-z0-9_-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9_-]*[a-z0-9])?)*))(?::(\d{1,5}))?$/;

/**
 * A `Host` header (or a `hosts` entry) as a name and an optional port; undefined when it is not
 * one (user info, a path, spaces, an empty name...). Names are compared lower-cased.
 */
export function parseHost(value: string): ViewerHost | undefined {
  const m = HOST.exec(value.trim().toLowerCase());
  if (!m) return undefined;
  const name = m[1] !== undefined ? `[${m[1]}]` : m[2]!;
  return m[3] !== undefined ? { name, port: m[3] } : { name };
}

/** Whether the request's `Host` header names one of `hosts` (an entry without a port: any port). */
export function hostAllowed(
  header: string | undefined,
  hosts: readonly ViewerHost[],
): boolean {
  const host = header === undefined ? undefined : parseHost(header);
  if (!host) return false;
  return hosts.some(
    (h) =>
      h.name === host.name && (h.port === undefined || h.port === host.port),
  );
}

/** Checks the viewer's options at `forRoot` time; refuses an unguarded viewer in production. @internal */
export function viewerConfig(options: DurableViewerOptions): ViewerConfig {
  if (typeof options !== 'object' || options === null)
    throw new DurableSetupError(NestMessages.viewerOptions());
  const path = options.path ?? '/runs';
  if (typeof path !== 'string' || !/^\/?[A-Za-z0-9._~\-/]*$/.test(path))
    throw new DurableSetupError(NestMessages.viewerPath(path));
  const given: unknown = options.hosts ?? DEFAULT_VIEWER_HOSTS;
  if (!Array.isArray(given) || given.length === 0)
    throw new DurableSetupError(NestMessages.viewerHosts(given));
  const hosts = given.map((entry: unknown) => {
    const host = typeof entry === 'string' ? parseHost(entry) : undefined;
    if (!host) throw new DurableSetupError(NestMessages.viewerHosts(entry));
    return host;
  });
  if (
    !options.guard &&
    !options.privateNetwork &&
    process.env.NODE_ENV === 'production'
  ) {
    throw new DurableSetupError(NestMessages.viewerUnguarded());
  }
  return {
    path,
    ...(options.guard && { guard: options.guard }),
    privateNetwork: options.privateNetwork === true,
    hosts,
  };
}
