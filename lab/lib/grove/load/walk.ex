defmodule Grove.Load.Walk do
  @moduledoc """
  Players who walk straight (`mix grove.load ws --walk straight`): each
  keeps one heading (one of the eight directions, drawn when it joins) and
  steps along it at the run's pace, so that over a long run it crosses
  zone after zone of a big world, waking the ones ahead and leaving the
  ones behind to fall asleep.

  It keeps walking whatever it meets:

    * **at the world's edge** it bounces: the part of its heading that
      would take it off the world is reversed (east becomes west, north-east
      at the north edge becomes south-east) and it walks on that way;
    * **where a step is refused** (a tree, a rock, water, another player)
      it turns: after one refusal it tries 45 degrees to one side, after
      two 45 degrees to the other, then 90 degrees to either side, then
      135, and the first of these that it takes becomes its heading, so
      that a walker meeting a shore turns along it and walks on, refused a
      few times per obstacle rather than at every step. After seven
      refusals in a row it turns round and walks back the way it came.

  A refusal is seen as a step sent from a cell the player still stands on
  when it sends the next one. Pure functions: `Grove.Load.Swarm` keeps a
  walk per player and asks `next/3` for each step it sends.

  ## Examples

      iex> walk = Grove.Load.Walk.new(:e)
      iex> {dir, walk} = Grove.Load.Walk.next(walk, {5, 5}, {100, 100})
      iex> dir
      :e
      iex> {dir, walk} = Grove.Load.Walk.next(walk, {6, 5}, {100, 100})
      iex> dir
      :e
      iex> # Refused: still on {6, 5}; it turns.
      iex> {dir, walk} = Grove.Load.Walk.next(walk, {6, 5}, {100, 100})
      iex> dir
      :se
      iex> # Taken: south-east is its heading now.
      iex> {dir, _walk} = Grove.Load.Walk.next(walk, {7, 6}, {100, 100})
      iex> dir
      :se
      iex> # At the east edge, east becomes west.
      iex> {dir, _walk} = Grove.Load.Walk.next(Grove.Load.Walk.new(:ne), {99, 50}, {100, 100})
      iex> dir
      :nw
  """

  alias Grove.World.Grid

  defstruct [:heading, last: nil, sent: nil, refused: 0]

  @type t :: %__MODULE__{
          heading: 0..7,
          last: Grid.cell() | nil,
          sent: 0..7 | nil,
          refused: non_neg_integer()
        }

  # The turn, in eighths, tried after 0, 1, 2... refusals in a row.
  @side_steps {0, 1, -1, 2, -2, 3, -3}
  @turn_round_after tuple_size(@side_steps)

  @doc "A walk along `direction` (or a heading 0..7, north clockwise)."
  @spec new(Grid.direction() | 0..7) :: t()
  def new(heading) when heading in 0..7, do: %__MODULE__{heading: heading}
  def new(direction), do: new(Grove.Actor.heading(direction))

  @doc "The walk's heading now, as a direction."
  @spec heading(t()) :: Grid.direction()
  def heading(%__MODULE__{heading: heading}), do: Grove.Actor.direction(heading)

  @doc """
  The direction of the next step of a player standing on `cell` of a world
  `{width, height}` cells, and the walk to keep once that step is sent.
  """
  @spec next(t(), Grid.cell(), {pos_integer(), pos_integer()}) :: {Grid.direction(), t()}
  def next(%__MODULE__{} = walk, cell, size) do
    {heading, refused} =
      cond do
        # Still where it sent its last step from: refused.
        walk.last == cell -> {walk.heading, walk.refused + 1}
        # A turn taken after a refusal: its heading from now on.
        walk.refused > 0 and walk.sent != nil -> {walk.sent, 0}
        true -> {walk.heading, 0}
      end

    {heading, refused} =
      if refused >= @turn_round_after,
        do: {Integer.mod(heading + 4, 8), 0},
        else: {heading, refused}

    heading = bounce(heading, cell, size)
    sent = Integer.mod(heading + elem(@side_steps, refused), 8)

    {Grove.Actor.direction(sent),
     %__MODULE__{heading: heading, last: cell, sent: sent, refused: refused}}
  end

  # The heading with the part that would step off the world reversed.
  defp bounce(heading, {x, y} = cell, {width, height}) do
    {nx, ny} = Grid.step(cell, Grove.Actor.direction(heading))
    {dx, dy} = {nx - x, ny - y}
    dx = if nx < 0 or nx >= width, do: -dx, else: dx
    dy = if ny < 0 or ny >= height, do: -dy, else: dy

    case Grove.Actor.toward(cell, {x + dx, y + dy}) do
      nil -> heading
      direction -> Grove.Actor.heading(direction)
    end
  end
end
