defmodule Grove.World.Zone.Residents do
  @moduledoc false
  # The resident actors of one zone and when each steps: plain data the
  # zone process keeps beside its core. A resident is an actor whose
  # entity carries a walk (`Grove.World.Entity`'s `walk`: its kind, its
  # state and its interval): its zone steps it, on this schedule, through
  # the same move rules as any client's move (and runs its actions), with
  # no message per move. It comes onto a zone's schedule when it joins,
  # arrives or is recovered there, and goes off it when it leaves the
  # zone in any way.
  #
  # The schedule costs next to nothing per step, since a step is what a
  # resident costs: a ring of `resolution` ms slots per interval, and a
  # resident in the slot its id falls in (`rem(id, slots)`), where it
  # stays from one step to the next. A beat takes one slot of every ring;
  # a resident steps once per interval (rounded to whole slots), each at a
  # phase of its own, so the steps of a zone spread evenly over the
  # interval as a herd's jitter spread them; a zone's beats are offset by
  # a phase of its own, so that zones do not all step at once. Taking one
  # off the schedule looks through its slot only.
  #
  # Rounds by hand (`Grove.World.walk/1`, a world that ticks by hand): a
  # round, numbered in the order rounds are asked for, reaches the zones
  # one by one, and a resident that steps across a border may reach the
  # zone beyond before the round does. It took its step of that round:
  # the zone keeps it (`arrived/3`) until it walks the round
  # (`start_round/2`), which passes it by.
  #
  #     iex> alias Grove.World.Zone.Residents
  #     iex> residents = Residents.new(250, 0) |> Residents.add(7, 1000)
  #     iex> Residents.size(residents)
  #     1
  #     iex> Residents.slot_at(residents, 1800)
  #     7
  #     iex> Residents.due(residents, 7)
  #     [7]
  #     iex> Residents.due(residents, 8)
  #     []
  #     iex> residents |> Residents.drop(7, 1000) |> Residents.size()
  #     0

  defstruct rings: %{}, resolution: 250, phase: 0, round: nil, stepped: %{}

  @type t :: %__MODULE__{
          rings: %{pos_integer() => tuple()},
          resolution: pos_integer(),
          phase: integer(),
          round: integer() | nil,
          stepped: %{non_neg_integer() => integer()}
        }

  @doc "No resident yet, on beats `resolution` ms apart offset by `phase` ms."
  @spec new(pos_integer(), integer()) :: t()
  def new(resolution, phase), do: %__MODULE__{resolution: resolution, phase: phase}

  @doc "How many residents are on the schedule."
  @spec size(t()) :: non_neg_integer()
  def size(%__MODULE__{rings: rings}) do
    for {_interval, ring} <- rings, ids <- Tuple.to_list(ring), reduce: 0 do
      count -> count + length(ids)
    end
  end

  @doc "True when nobody is on the schedule."
  @spec empty?(t()) :: boolean()
  def empty?(%__MODULE__{rings: rings}), do: map_size(rings) == 0

  @doc "A resident that steps every `interval` ms comes onto the schedule."
  @spec add(t(), non_neg_integer(), pos_integer()) :: t()
  def add(%__MODULE__{rings: rings} = residents, id, interval) do
    ring =
      case rings do
        %{^interval => ring} -> ring
        _ -> Tuple.duplicate([], slots(residents, interval))
      end

    at = rem(id, tuple_size(ring))
    %{residents | rings: Map.put(rings, interval, put_elem(ring, at, [id | elem(ring, at)]))}
  end

  @doc "A resident goes off the schedule (nothing when it is not on it)."
  @spec drop(t(), non_neg_integer(), pos_integer()) :: t()
  def drop(%__MODULE__{stepped: stepped} = residents, id, interval)
      when is_map_key(stepped, id),
      do: drop(%{residents | stepped: Map.delete(stepped, id)}, id, interval)

  def drop(%__MODULE__{rings: rings} = residents, id, interval) do
    case rings do
      %{^interval => ring} ->
        at = rem(id, tuple_size(ring))

        case List.delete(elem(ring, at), id) do
          [] ->
            ring = put_elem(ring, at, [])

            if Enum.all?(Tuple.to_list(ring), &(&1 == [])),
              do: %{residents | rings: Map.delete(rings, interval)},
              else: %{residents | rings: %{rings | interval => ring}}

          ids ->
            %{residents | rings: %{rings | interval => put_elem(ring, at, ids)}}
        end

      _ ->
        residents
    end
  end

  @doc "The beat a monotonic time (ms) falls in."
  @spec slot_at(t(), integer()) :: integer()
  def slot_at(%__MODULE__{resolution: resolution, phase: phase}, ms),
    do: Integer.floor_div(ms - phase, resolution)

  @doc "When a beat is due, in monotonic ms."
  @spec due_ms(t(), integer()) :: integer()
  def due_ms(%__MODULE__{resolution: resolution, phase: phase}, beat),
    do: beat * resolution + phase

  @doc "The residents that step at a beat, every ring's slot of it."
  @spec due(t(), integer()) :: [non_neg_integer()]
  def due(%__MODULE__{rings: rings}, beat) do
    Enum.reduce(rings, [], fn {_interval, ring}, due ->
      case elem(ring, Integer.mod(beat, tuple_size(ring))) do
        [] -> due
        ids when due == [] -> ids
        ids -> ids ++ due
      end
    end)
  end

  @doc "Every resident on the schedule, in no order."
  @spec all(t()) :: [non_neg_integer()]
  def all(%__MODULE__{rings: rings}) do
    for {_interval, ring} <- rings, ids <- Tuple.to_list(ring), id <- ids, do: id
  end

  @doc """
  A round by hand: the residents that step in it (those that took their
  step of it already in the zone they came from excepted), and the round
  under way (`current_round/1`).

      iex> alias Grove.World.Zone.Residents
      iex> residents = Residents.new(250, 0) |> Residents.add(7, 1000) |> Residents.add(8, 1000)
      iex> residents = Residents.arrived(residents, 8, 5)
      iex> {ids, residents} = Residents.start_round(residents, 5)
      iex> {ids, Residents.current_round(residents)}
      {[7], 5}
      iex> {ids, _residents} = Residents.start_round(residents, 6)
      iex> Enum.sort(ids)
      [7, 8]
  """
  @spec start_round(t(), integer()) :: {[non_neg_integer()], t()}
  def start_round(%__MODULE__{stepped: stepped} = residents, round) do
    ids = Enum.reject(all(residents), &(Map.get(stepped, &1) == round))
    later = Map.filter(stepped, fn {_id, at} -> at > round end)
    {ids, %{residents | round: round, stepped: later}}
  end

  @doc "The round by hand under way or last walked; nil before the first."
  @spec current_round(t()) :: integer() | nil
  def current_round(%__MODULE__{round: round}), do: round

  @doc """
  A resident arrived by its step of `round`, which this zone has not
  walked yet: it steps no more in it here. One of a round walked already
  is nothing to keep.
  """
  @spec arrived(t(), non_neg_integer(), integer()) :: t()
  def arrived(%__MODULE__{round: walked} = residents, _id, round)
      when walked != nil and round <= walked,
      do: residents

  def arrived(%__MODULE__{stepped: stepped} = residents, id, round),
    do: %{residents | stepped: Map.put(stepped, id, round)}

  # Slots of a ring: the interval in whole beats, at least one.
  defp slots(%__MODULE__{resolution: resolution}, interval),
    do: max(div(interval + div(resolution, 2), resolution), 1)
end
