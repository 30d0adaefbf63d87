import {
  ForbiddenException,
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
import { CSRF_HEADER, ViewerCsrf } from './viewer.csrf';

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
 * response, answers only for the allowed `Host`s (421 otherwise: DNS rebinding), and refuses every
 * request that changes something (a POST) unless it comes from the viewer's page itself: its
 * `Origin` (when sent) is the request's own, its `Sec-Fetch-Site` (when sent) is `same-origin`, its
 * body is `application/json`, and it carries the page's CSRF token (see `ViewerCsrf`). A refusal
 * is a 403 naming every problem; nothing runs. Also warns at bootstrap about a viewer with no guard.
 * @internal
 */
@Injectable()
export class ViewerSecurityGuard
  implements CanActivate, OnApplicationBootstrap
{
  private readonly logger = new Logger('DurableViewer');

  constructor(
    @Inject(VIEWER_CONFIG) private readonly config: ViewerConfig,
    private readonly csrf: ViewerCsrf,
  ) {}

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
    if (['GET', 'HEAD'].includes(req.method.toUpperCase())) return true;

    const problems = this.crossSite(req, host!);
    if (problems.length > 0) {
      throw new ForbiddenException({
        statusCode: HttpStatus.FORBIDDEN,
        error: 'Forbidden',
        message: NestMessages.viewerCrossSite(problems),
        problems,
      });
    }
    return true;
  }

  /** Why a request that changes something may not come from the viewer's own page; [] when it does. */
  private crossSite(req: ViewerRequest, host: string): string[] {
    const problems: string[] = [];
    const own = originOf(`${schemeOf(req)}://${host}`);
    const origin = one(req.headers.origin);
    if (origin !== undefined && originOf(origin) !== own) {
      const behindProxy =
        origin.startsWith('https:') && own?.startsWith('http:');
      problems.push(
        `Origin ${JSON.stringify(origin)} is not this viewer's origin ${JSON.stringify(own)}` +
          (behindProxy
            ? " (behind a TLS-terminating proxy, let the app see the scheme: Express app.set('trust proxy', ...), Fastify trustProxy)"
            : ''),
      );
    }
    const site = one(req.headers['sec-fetch-site']);
    if (site !== undefined && site !== 'same-origin')
      problems.push(
        `Sec-Fetch-Site is ${JSON.stringify(site)}, not "same-origin"`,
      );
    const type = one(req.headers['content-type']);
    const media = type?.split(';')[0]!.trim().toLowerCase();
    if (media !== 'application/json')
      problems.push(
        `content-type is ${JSON.stringify(type ?? '')}, not "application/json"`,
      );
    const token = this.csrf.problem(
      one(req.headers[CSRF_HEADER]),
      one(req.headers.cookie),
    );
    if (token) problems.push(token);
    return problems;
  }
}

/** The request's scheme: 'https' or 'http'. @internal */
export function schemeOf(req: ViewerRequest): 'http' | 'https' {
  if (req.protocol !== undefined)
    return req.protocol === 'https' ? 'https' : 'http';
  return req.socket?.encrypted ? 'https' : 'http';
}

/** The serialised origin of a URL (default ports dropped, lower case); undefined if none. */
function originOf(url: string): string | undefined {
  try {
    const origin = new URL(url).origin;
    return origin === 'null' ? undefined : origin;
  } catch {
    return undefined;
  }
}

function one(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}
