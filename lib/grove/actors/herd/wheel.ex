defmodule Grove.Actors.Herd.Wheel do
  @moduledoc false
  # A herd's timing wheel: its actors by the slot they are due in. Slots
  # are `resolution` ms wide and numbered absolutely from the monotonic
  # clock, offset by the herd's `phase` so that herds do not all fire at
  # once. Each actor is on the wheel once, as a tuple whose first element
  # is its id. Plain data: the herd reads the clock and sets the timer.
  #
  # A wheel of several `lanes` keeps each slot's actors by lane (a herd's
  # kinds), a list each: a slot is then taken lane by lane (`pop_runs/2`),
  # one run of each, however many walks put actors in it. One list a slot,
  # joined end to end by each walk that put actors in it, would hold a run
  # for every run of every such walk, and after a while about as many
  # runs as actors.
  #
  # An entry may stand for several actors: a group, `{:group, count,
  # tag, members, key}`, its `count` members a list of entries (a herd's
  # actors of one zone that rest together, `Grove.Actors.Herd`). A group
  # is a tuple of five, an actor's entry never is, and no actor's id is
  # `:group`: a match on an actor's entry fails on a group, rather than
  # take it for one actor.
  # A slot is taken as it was put, groups and all (`pop/2`,
  # `pop_runs/2`); what looks for or lists actors (`entries/1`, `size/1`,
  # `drop_entry/2`, `take_entries/2`, `map/2`) looks inside groups, so an
  # actor in a group is on the wheel once as any other.
  #
  #     iex> alias Grove.Actors.Herd.Wheel
  #     iex> wheel = Wheel.new(100, 7) |> Wheel.add(3, {:a, 0}) |> Wheel.add(5, {:b, 0})
  #     iex> Wheel.slot_at(wheel, 307)
  #     3
  #     iex> Wheel.due_ms(wheel, 3)
  #     307
  #     iex> Wheel.next_due(wheel, 4, 10)
  #     5
  #     iex> {[{:a, 0}], wheel} = Wheel.pop(wheel, 3)
  #     iex> Wheel.size(wheel)
  #     1

  defstruct slots: %{}, resolution: 100, phase: 0, lanes: 1

  @type slot :: integer()
  @type entry :: tuple()
  @type lane :: non_neg_integer()
  @type t :: %__MODULE__{
          # A slot's actors: a list, or with several lanes a tuple of a list a lane.
          slots: %{slot() => [entry()] | tuple()},
          resolution: pos_integer(),
          phase: integer(),
          lanes: pos_integer()
        }

  @doc "An empty wheel of `resolution` ms slots, offset by `phase` ms, of `lanes` lanes."
  @spec new(pos_integer(), integer(), pos_integer()) :: t()
  def new(resolution, phase, lanes \\ 1),
    do: %__MODULE__{resolution: resolution, phase: phase, lanes: lanes}

  @doc """
  The slot a monotonic time (ms) falls in. Monotonic time is negative as
  often as not: `div/2` would round slots towards zero, so that a beat
  just after a slot began would walk the next slot too, a whole slot early.
  """
  @spec slot_at(t(), integer()) :: slot()
  def slot_at(wheel, ms), do: Integer.floor_div(ms - wheel.phase, wheel.resolution)

  @doc "When a slot is due, in monotonic ms."
  @spec due_ms(t(), slot()) :: integer()
  def due_ms(wheel, slot), do: slot * wheel.resolution + wheel.phase

  @doc "Slots in `ms`, rounded up, at least one."
  @spec slots(t(), pos_integer()) :: pos_integer()
  def slots(wheel, ms), do: max(div(ms + wheel.resolution - 1, wheel.resolution), 1)

  @doc """
  The width of the range an actor's wait is drawn from, in ms: the
  interval's jitter on both sides, and a slot's width more, so that
  rounding down to whole slots (`wait_slots/4`) keeps the average wait at
  the interval. Exactly so when the interval is a multiple of the slot.
  """
  @spec wait_span(t(), non_neg_integer()) :: pos_integer()
  def wait_span(wheel, jitter_ms), do: 2 * jitter_ms + wheel.resolution

  @doc """
  The slots an actor waits before its next move: the interval less its
  jitter, plus `offset` (drawn uniformly from `0..wait_span - 1`), rounded
  down to whole slots, at least one.

      iex> wheel = Grove.Actors.Herd.Wheel.new(500, 0)
      iex> for offset <- [0, 199, 200, 699, 700, 899],
      ...>     do: Grove.Actors.Herd.Wheel.wait_slots(wheel, 1000, 200, offset)
      [1, 1, 2, 2, 3, 3]
  """
  @spec wait_slots(t(), pos_integer(), non_neg_integer(), non_neg_integer()) :: pos_integer()
  def wait_slots(%__MODULE__{resolution: resolution}, interval, jitter_ms, offset) do
    # `div/2`, not a floor: a wait short of one slot is one slot, however
    # it rounds (a herd's every turn comes here).
    case div(interval - jitter_ms + offset, resolution) do
      slots when slots > 1 -> slots
      _short -> 1
    end
  end

  @doc "True when no actor is on the wheel."
  @spec empty?(t()) :: boolean()
  def empty?(%__MODULE__{slots: slots}), do: map_size(slots) == 0

  @doc """
  The actors of a list of entries, each group's members in its place.

      iex> Grove.Actors.Herd.Wheel.ungroup([{:a, 0}, {:group, 2, 0, [{:b, 0}, {:c, 0}], 7}])
      [{:a, 0}, {:b, 0}, {:c, 0}]
  """
  @spec ungroup([entry()]) :: [entry()]
  def ungroup(entries) do
    if Enum.any?(entries, &group?/1),
      do: Enum.flat_map(entries, &members/1),
      else: entries
  end

  @doc "The actors an entry stands for: a group's members, else the entry alone."
  @spec members(entry()) :: [entry()]
  def members({:group, _count, _tag, members, _key}), do: members
  def members(entry), do: [entry]

  defp group?({:group, _count, _tag, _members, _key}), do: true
  defp group?(_entry), do: false

  @doc "How many actors are on the wheel."
  @spec size(t()) :: non_neg_integer()
  def size(wheel), do: wheel |> entries() |> length()

  @doc "Puts an actor in a slot (in its lane, on a wheel of several)."
  @spec add(t(), slot(), entry(), lane()) :: t()
  def add(wheel, slot, entry, lane \\ 0)

  def add(%__MODULE__{slots: slots, lanes: 1} = wheel, slot, entry, _lane) do
    case slots do
      %{^slot => entries} -> %{wheel | slots: %{slots | slot => [entry | entries]}}
      _ -> %{wheel | slots: Map.put(slots, slot, [entry])}
    end
  end

  def add(wheel, slot, entry, lane), do: add_all(wheel, slot, [entry], lane)

  @doc """
  Puts actors in a slot at once (in one lane, on a wheel of several),
  ahead of those already in it, as many `add/4` calls would in the
  list's reverse order (a herd's turns gather the actors that come back
  in the same slot).
  """
  @spec add_all(t(), slot(), [entry()], lane()) :: t()
  def add_all(wheel, slot, entries, lane \\ 0)
  def add_all(wheel, _slot, [], _lane), do: wheel

  def add_all(%__MODULE__{slots: slots, lanes: 1} = wheel, slot, entries, _lane) do
    case slots do
      %{^slot => present} -> %{wheel | slots: %{slots | slot => entries ++ present}}
      _ -> %{wheel | slots: Map.put(slots, slot, entries)}
    end
  end

  def add_all(%__MODULE__{slots: slots, lanes: lanes} = wheel, slot, entries, lane) do
    case slots do
      %{^slot => present} ->
        lane_entries = entries ++ elem(present, lane)
        %{wheel | slots: %{slots | slot => put_elem(present, lane, lane_entries)}}

      _ ->
        empty = :erlang.make_tuple(lanes, [])
        %{wheel | slots: Map.put(slots, slot, put_elem(empty, lane, entries))}
    end
  end

  @doc """
  Every entry put through `fun`, each in its slot (an actor kind's new
  code upgrading its actors' states).
  """
  @spec map(t(), (entry() -> entry())) :: t()
  def map(%__MODULE__{slots: slots} = wheel, fun),
    do: %{wheel | slots: Map.new(slots, fn {slot, held} -> {slot, map_held(held, fun)} end)}

  defp map_held(entries, fun) when is_list(entries), do: Enum.map(entries, &map_entry(&1, fun))

  defp map_held(lanes, fun),
    do: lanes |> Tuple.to_list() |> Enum.map(&map_held(&1, fun)) |> List.to_tuple()

  defp map_entry({:group, count, tag, members, key}, fun),
    do: {:group, count, tag, Enum.map(members, fun), key}

  defp map_entry(entry, fun), do: fun.(entry)

  @doc """
  The actors on the wheel, in no order: an entry each, a group's members
  each in its place (`ungroup/1`), never a group.
  """
  @spec entries(t()) :: [entry()]
  def entries(%__MODULE__{slots: slots}),
    do: slots |> Map.values() |> Enum.flat_map(&runs/1) |> Enum.concat() |> ungroup()

  @doc """
  Takes the entries due in a slot (groups as they are): `{entries, wheel}`,
  or `{nil, wheel}` when none is.
  """
  @spec pop(t(), slot()) :: {[entry()] | nil, t()}
  def pop(wheel, slot) do
    case pop_runs(wheel, slot) do
      {nil, wheel} -> {nil, wheel}
      {runs, wheel} -> {Enum.concat(runs), wheel}
    end
  end

  @doc """
  Takes the actors due in a slot lane by lane: `{runs, wheel}`, a list of
  each lane's that has any, in the lanes' order, or `{nil, wheel}` when
  none is due.
  """
  @spec pop_runs(t(), slot()) :: {[[entry()]] | nil, t()}
  def pop_runs(wheel, slot) do
    case Map.pop(wheel.slots, slot) do
      {nil, slots} -> {nil, %{wheel | slots: slots}}
      {held, slots} -> {runs(held), %{wheel | slots: slots}}
    end
  end

  # A slot's actors as lists, a lane's each (one, with one lane).
  defp runs([]), do: []
  defp runs(entries) when is_list(entries), do: [entries]
  defp runs(lanes), do: for(entries <- Tuple.to_list(lanes), entries != [], do: entries)

  @doc "The wheel without the actor `id`, or nil when it is not on it."
  @spec drop(t(), term()) :: t() | nil
  def drop(wheel, id) do
    case drop_entry(wheel, id) do
      nil -> nil
      {_entry, wheel} -> wheel
    end
  end

  @doc "`drop/2`, with the actor's entry: `{entry, wheel}`, or nil when it is not on it."
  @spec drop_entry(t(), term()) :: {entry(), t()} | nil
  def drop_entry(wheel, id) do
    Enum.find_value(wheel.slots, fn {slot, held} ->
      case take_from(held, id) do
        nil -> nil
        {entry, left} -> {entry, put_slot(wheel, slot, left)}
      end
    end)
  end

  defp take_from(entries, id) when is_list(entries) do
    case List.keytake(entries, id, 0) do
      nil -> take_from_groups(entries, id, [])
      taken -> taken
    end
  end

  defp take_from(lanes, id) do
    Enum.find_value(0..(tuple_size(lanes) - 1), fn lane ->
      case take_from(elem(lanes, lane), id) do
        nil -> nil
        {entry, rest} -> {entry, put_elem(lanes, lane, rest)}
      end
    end)
  end

  # An actor taken out of its group: the group one less, or the one left.
  defp take_from_groups([], _id, _passed), do: nil

  defp take_from_groups([{:group, count, tag, members, key} = group | rest], id, passed) do
    case List.keytake(members, id, 0) do
      nil ->
        take_from_groups(rest, id, [group | passed])

      {entry, [one]} ->
        {entry, :lists.reverse(passed, [one | rest])}

      {entry, left} ->
        {entry, :lists.reverse(passed, [{:group, count - 1, tag, left, key} | rest])}
    end
  end

  defp take_from_groups([entry | rest], id, passed),
    do: take_from_groups(rest, id, [entry | passed])

  # A slot's actors as they are left: the slot goes once it has none.
  defp put_slot(wheel, slot, held) do
    if runs(held) == [],
      do: %{wheel | slots: Map.delete(wheel.slots, slot)},
      else: %{wheel | slots: %{wheel.slots | slot => held}}
  end

  @doc "Takes up to `count` actors off the wheel: their ids and the wheel left."
  @spec take(t(), non_neg_integer()) :: {[term()], t()}
  def take(wheel, count) do
    {entries, wheel} = take_entries(wheel, count)
    {Enum.map(entries, &elem(&1, 0)), wheel}
  end

  @doc "`take/2`, with the actors' entries rather than their ids."
  @spec take_entries(t(), non_neg_integer()) :: {[entry()], t()}
  def take_entries(wheel, count), do: take_entries(wheel, count, [])

  defp take_entries(wheel, count, taken) when count <= 0 or map_size(wheel.slots) == 0,
    do: {taken, wheel}

  defp take_entries(wheel, count, taken_before) do
    {slot, held} = Enum.at(wheel.slots, 0)
    {taken, kept} = take_held(held, count)
    wheel = put_slot(wheel, slot, kept)
    take_entries(wheel, count - length(taken), taken ++ taken_before)
  end

  defp take_held(entries, count) when is_list(entries), do: Enum.split(ungroup(entries), count)

  defp take_held(lanes, count) do
    {taken, kept, _left} =
      Enum.reduce(0..(tuple_size(lanes) - 1), {[], lanes, count}, fn lane, {taken, kept, left} ->
        {more, rest} = take_held(elem(kept, lane), left)
        {more ++ taken, put_elem(kept, lane, rest), left - length(more)}
      end)

    {taken, kept}
  end

  @doc """
  The first slot from `from` on with an actor due, looked for slot by slot
  up to `horizon` (where the actors usually are), and in the whole wheel
  past it; nil when the wheel is empty.
  """
  @spec next_due(t(), slot(), slot()) :: slot() | nil
  def next_due(wheel, from, horizon) do
    cond do
      map_size(wheel.slots) == 0 ->
        nil

      from < horizon ->
        if is_map_key(wheel.slots, from), do: from, else: next_due(wheel, from + 1, horizon)

      true ->
        wheel.slots |> Map.keys() |> Enum.min()
    end
  end
end
