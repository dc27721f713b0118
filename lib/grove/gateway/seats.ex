defmodule Grove.Gateway.Seats do
  @moduledoc false
  # The gateway's `:max_sessions`, kept exactly: one atomic, the seats
  # taken. An upgrade takes a seat before it starts its connection, with a
  # compare-and-swap that never takes one past the limit, so however many
  # upgrades run at once, no more connections than `:max_sessions` exist
  # (or are being started) at any instant. The seat is the connection's
  # from its start and given back when it ends (its `terminate/2`); an
  # upgrade that fails before its connection started gives it back itself.
  #
  # A session counted once its connection had the socket (as the
  # `sessions` gauge still is) made the limit approximate: every upgrade
  # in flight passed the check against the same count, and a join storm
  # took hundreds of players past it.

  @type t :: :atomics.atomics_ref()

  @doc "No seat taken; made once by the gateway."
  @spec new() :: t()
  def new, do: :atomics.new(1, signed: true)

  @doc "Takes a seat if fewer than `max` are taken."
  @spec take(t(), non_neg_integer()) :: :ok | :full
  def take(seats, max) do
    case :atomics.get(seats, 1) do
      taken when taken >= max ->
        :full

      taken ->
        # Another took or gave back one meanwhile: look again.
        case :atomics.compare_exchange(seats, 1, taken, taken + 1) do
          :ok -> :ok
          _changed -> take(seats, max)
        end
    end
  end

  @doc "Gives a seat back."
  @spec give_back(t()) :: :ok
  def give_back(seats), do: :atomics.sub(seats, 1, 1)

  @doc "The seats taken."
  @spec taken(t()) :: integer()
  def taken(seats), do: :atomics.get(seats, 1)
end
