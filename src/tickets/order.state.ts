import { IsInt, IsString, Max, Min, MinLength } from 'class-validator';

/** The tickets flow's state: validated before anything is stored. */
export class Order {
  @IsString()
  @MinLength(1)
  show = '';

  @IsInt()
  @Min(1)
  @Max(10)
  seats = 1;

  @IsString()
  note = '';
}
