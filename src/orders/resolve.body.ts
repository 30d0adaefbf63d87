import { Type } from 'class-transformer';
import {
  Allow,
  IsBoolean,
  IsOptional,
  IsString,
  Matches,
  MaxLength,
  ValidateNested,
} from 'class-validator';

/** The error a call in doubt returned, as its system shows it. */
export class CallErrorBody {
  @MaxLength(200)
  @IsString()
  name!: string;

  @MaxLength(2000)
  @IsString()
  message!: string;
}

/**
 * `POST /orders/:id/resolve`: what one call in doubt really did, the run viewer's body. The
 * shape is checked here (unknown fields refused); the runner checks the rest (a result that is
 * not JSON, a result with `ran: false`, a call that is not in doubt) with nothing stored.
 */
export class ResolveBody {
  /** The call's id, `node#index` (`needsDecision.calls[].callId`). */
  @Matches(/^[^#]+#\d+$/, { message: 'call must be a call id, node#index' })
  @IsString()
  call!: string;

  /** True: it ran (give `result` or `error`); false: it did not (it runs now, once). */
  @IsBoolean()
  ran!: boolean;

  /** What it returned (any JSON): for `charge_card`, the provider's charge id. */
  @Allow()
  result?: unknown;

  @IsOptional()
  @ValidateNested()
  @Type(() => CallErrorBody)
  error?: CallErrorBody;

  @IsOptional()
  @MaxLength(200)
  @IsString()
  by?: string;

  @IsOptional()
  @MaxLength(200)
  @IsString()
  reason?: string;
}
