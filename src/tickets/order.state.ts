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
  // The type check is the decorator nearest the field: class-validator runs a field's checks from
  // the bottom up, and `POST /orders` stops at a field's first failure (one message per field, so
  // `"seats": "x"` is "must be an integer number", not also "must not be less than 1").
  @MinLength(1)
  @IsString()
  show = '';

  @Max(10)
  @Min(1)
  @IsInt()
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
