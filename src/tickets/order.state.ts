import {
  IsInt,
  IsOptional,
  IsString,
  Max,
  Min,
  MinLength,
} from 'class-validator';

/**
 * The tickets flow's state. `POST /orders` bodies are validated against it before anything is
 * stored; nodes receive an instance of it.
 */
export class Order {
  @IsString()
  @MinLength(1)
  show = '';

  @IsInt()
  @Min(1)
  @Max(10)
  seats = 1;

  /** What the last step did (set by the nodes). */
  @IsOptional()
  @IsString()
  note?: string;

  /** The payment's reference (set by `pay`). */
  @IsOptional()
  @IsString()
  payment?: string;
}

/** The arguments of `charge_card`: validated on every call, and its JSON schema for models. */
export class ChargeArgs {
  @IsString()
  @MinLength(1)
  show!: string;

  @IsInt()
  @Min(1)
  @Max(10)
  seats!: number;
}
