defmodule Grove.RateLimit do
  @moduledoc """
  A rate limit as a virtual schedule (the generic cell rate algorithm): each
  event books the next `1 / rate` seconds after the later of now and the last
  booking, and is allowed while the bookings run no further ahead than the
  burst. The whole state of one limited thing is one integer (or `nil` before
  its first event), so it costs nothing to keep one per entity or per
  connection, and no floats are involved.

  ## Examples

      iex> limit = Grove.RateLimit.new(10, 2)
      iex> {:ok, booked} = Grove.RateLimit.allow(limit, nil, 1000)
      iex> {:ok, booked} = Grove.RateLimit.allow(limit, booked, 1000)
      iex> Grove.RateLimit.allow(limit, booked, 1000)
      :limited
      iex> match?({:ok, _}, Grove.RateLimit.allow(limit, booked, 1100))
      true
  """

  @enforce_keys [:spacing, :tolerance]
  defstruct @enforce_keys

  @type t :: %__MODULE__{spacing: pos_integer(), tolerance: pos_integer()}

  @typedoc "The time, in microseconds, up to which events are booked; `nil` before the first."
  @type booked :: integer() | nil

  @doc "A limit of `rate` events per second on average, `burst` at once."
  @spec new(pos_integer(), pos_integer()) :: t()
  def new(rate, burst) when is_integer(rate) and rate > 0 and is_integer(burst) and burst > 0 do
    spacing = div(1_000_000, rate)
    %__MODULE__{spacing: spacing, tolerance: burst * spacing}
  end

  @doc "Books one event at `now` (milliseconds, any monotonic clock, may be negative)."
  @spec allow(t(), booked(), integer()) :: {:ok, integer()} | :limited
  def allow(%__MODULE__{spacing: spacing, tolerance: tolerance}, booked, now_ms) do
    now = now_ms * 1000

    next =
      case booked do
        nil -> now + spacing
        booked -> max(booked, now) + spacing
      end

    if next - now <= tolerance, do: {:ok, next}, else: :limited
  end
end
