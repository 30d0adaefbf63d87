import {
  HttpException,
  HttpStatus,
  Inject,
  Injectable,
  Logger,
  type CanActivate,
  type ExecutionContext,
  type OnApplicationBootstrap,
} from '@nestjs/common';
import { NestMessages } from '../durable.messages';
import { VIEWER_CONFIG, hostAllowed, type ViewerConfig } from './viewer.config';

/** The parts of a request the viewer reads (Express and Fastify both have them). @internal */
export interface ViewerRequest {
  method: string;
  url: string;
  originalUrl?: string;
  headers: Record<string, string | string[] | undefined>;
  /** 'http' or 'https' (Express honours `trust proxy` here, Fastify `trustProxy`). */
  protocol?: string;
  socket?: { encrypted?: boolean };
}

/** The part of a response the viewer writes headers with (Express and Fastify both have it). @internal */
export interface ViewerResponse {
  header(name: string, value: string): unknown;
}

/** The API's policy: a JSON answer loads nothing, runs nothing and is framed nowhere. */
export const API_CSP =
  "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'";

/** Sent with every viewer response (the page replaces the CSP with its own). */
const SECURITY_HEADERS: ReadonlyArray<readonly [string, string]> = [
  ['content-security-policy', API_CSP],
  ['x-frame-options', 'DENY'],
  ['x-content-type-options', 'nosniff'],
  ['referrer-policy', 'no-referrer'],
  ['cache-control', 'no-store'],
  ['cross-origin-opener-policy', 'same-origin'],
  ['cross-origin-resource-policy', 'same-origin'],
];

/**
 * The viewer's own guard, run before the application's: sets the security headers on every
 * response and answers only for the allowed `Host`s (421 otherwise: DNS rebinding). Also warns at
 * bootstrap about a viewer with no guard.
 * @internal
 */
@Injectable()
export class ViewerSecurityGuard
  implements CanActivate, OnApplicationBootstrap
{
  private readonly logger = new Logger('DurableViewer');

  constructor(@Inject(VIEWER_CONFIG) private readonly config: ViewerConfig) {}

  onApplicationBootstrap(): void {
    if (!this.config.guard && !this.config.privateNetwork)
      this.logger.warn(NestMessages.viewerUnguardedWarning(this.config.path));
  }

  canActivate(context: ExecutionContext): boolean {
    if (context.getType() !== 'http') return false;
    const http = context.switchToHttp();
    const req = http.getRequest<ViewerRequest>();
    const res = http.getResponse<ViewerResponse>();
    for (const [name, value] of SECURITY_HEADERS) res.header(name, value);

    const host = one(req.headers.host);
    if (!hostAllowed(host, this.config.hosts)) {
      throw new HttpException(
        {
          statusCode: HttpStatus.MISDIRECTED,
          error: 'Misdirected Request',
          message: NestMessages.viewerHostRefused(
            host,
            this.config.hosts.map((h) =>
              h.port ? `${h.name}:${h.port}` : h.name,
            ),
          ),
        },
        HttpStatus.MISDIRECTED,
      );
    }
    return true;
  }
}

function one(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}
